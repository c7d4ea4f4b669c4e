/**
 * Each configuration cycle's gateway in this worker, for the modules that
 * serve its traffic (http: src/http/modules/gateway.ts, which creates it;
 * stream: src/stream/modules/gateway.ts). Kept apart from runtime.ts so
 * that asking loads nothing of the gateway.
 */
import type { GatewayRuntime } from './runtime.ts';

const byCycle = new WeakMap<object, GatewayRuntime>();

export function setCycleRuntime(cycle: object, rt: GatewayRuntime): void {
  byCycle.set(cycle, rt);
}

export function cycleRuntime(cycle: object): GatewayRuntime | undefined {
  return byCycle.get(cycle);
}
