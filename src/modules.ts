/**
 * Every module built into Gatehouse, in nginx's order (which is also the
 * order phase handlers and filters are installed in).
 */
import type { CycleModule } from './core/cycle.ts';
import { coreModule } from './core/modules/core.ts';
import { httpCoreModule } from './http/modules/core/index.ts';
import { rewriteModule } from './http/modules/rewrite.ts';

export const modules: CycleModule[] = [
  coreModule,
  httpCoreModule,
  rewriteModule,
];
