// The model the relationship tests share: people in groups, folders in folders, documents in
// folders, a blocked list, and a condition on a group's access.
export const MODEL = `policy "drive" version 1

type user

type agent

type group {
  relation member: [user, agent, group#member]
}

type folder {
  relation parent: [folder]
  relation viewer: [user, agent, group#member, group#member with office_hours] or viewer from parent
}

type document {
  relation parent: [folder]
  relation blocked: [user, agent]
  relation viewer: ([user, agent, user:*, group#member] or viewer from parent) but not blocked
}

condition office_hours(hour: int, start: int, end: int) {
  hour >= start and hour < end
}
`;

/** `a#r@b` → the JSON form. */
export function rel(text: string, condition?: { name: string; context?: Record<string, unknown> }) {
  const at = text.indexOf('@');
  const left = text.slice(0, at);
  const h = left.indexOf('#');
  return { object: left.slice(0, h), relation: left.slice(h + 1), subject: text.slice(at + 1), ...(condition ? { condition } : {}) };
}
