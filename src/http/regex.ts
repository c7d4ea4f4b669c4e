/**
 * The regex helpers http files import from here live in the core
 * (src/core/regex.ts), where stream's map uses them too.
 */
export * from '../core/regex.ts';
