/**
 * ngx_http_grpc_module's location configuration: `grpc_pass`'s target,
 * `grpc_set_header`, and the engine's settings (the CGI family's fields,
 * with the values nginx hard-codes for gRPC: no response buffering).
 */
import { defineSlot } from '../../../conf/context.ts';
import type { Complete, ConfSlot } from '../../../conf/context.ts';
import type { ComplexValue } from '../../../core/variables.ts';
import { CGI_DEFAULTS, mergeCgi } from '../cgi-upstream/conf.ts';
import type { CgiDerived, CgiLocConf, CgiTarget } from '../cgi-upstream/conf.ts';

export interface GrpcSetHeader {
  name: string;
  value: ComplexValue;
}

export interface GrpcLocConf extends CgiLocConf {
  /** `:authority` by default: grpc_pass's host[:port] as written. */
  target?: CgiTarget & { authority?: string };
  /** The level's own grpc_set_header lines; a level with any inherits none. */
  setHeaders?: GrpcSetHeader[];
}

/** nginx: grpc responses go to the client as they come (upstream.buffering = 0, hard-coded). */
export const GRPC_DEFAULTS = { ...CGI_DEFAULTS, buffering: false, requestBuffering: false } as const satisfies GrpcLocConf;

/** Upstream fields not passed to the client (ngx_http_grpc_hide_headers). */
export const GRPC_HIDDEN = ['date', 'server', 'x-accel-expires', 'x-accel-redirect', 'x-accel-limit-rate', 'x-accel-buffering', 'x-accel-charset'];


export type GrpcLoc = Complete<GrpcLocConf, typeof GRPC_DEFAULTS> & { derived?: CgiDerived };

export const grpcLoc = defineSlot<GrpcLocConf, typeof GRPC_DEFAULTS>('grpc_loc', () => ({}), mergeCgi, GRPC_DEFAULTS) as
  unknown as ConfSlot<GrpcLocConf, GrpcLoc>;
