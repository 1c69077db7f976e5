export function singularOf(kinds: string): string { return kinds; }
export function permissionCovers(_p: string, _a: string, _r: string, _s?: Record<string, string>): boolean { return false; }
