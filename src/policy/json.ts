import type { Diagnostic } from './types.js';
export function validateJsonRule(_rule: unknown, _source?: string): Diagnostic[] { return []; }
export function validateJsonLimits(_limits: unknown, _source?: string): Diagnostic[] { return []; }
