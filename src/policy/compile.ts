import type { PolicySetSource } from './types.js';
export interface PolicySet { version: string; sources: PolicySetSource[]; readonly compiled: unknown }
