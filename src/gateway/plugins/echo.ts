/**
 * echo (apisix/plugins/echo.lua): the response body becomes `body` (the
 * upstream's is dropped), with `before_body` in front and `after_body` at
 * the end; `headers` are set on the response. The length and validators
 * go, as the body changed.
 */
import type { GatewayPlugin } from './registry.ts';

interface EchoConf { before_body?: string; body?: string; after_body?: string; headers?: Record<string, unknown> }

/** Per request: before_body went out. */
const BEFORE_SENT = {};

export const echo: GatewayPlugin<EchoConf> = {
  name: 'echo', version: 0.1, priority: 412,
  schema: {
    type: 'object',
    properties: {
      before_body: { description: 'body before the filter phase.', type: 'string' },
      body: { description: 'body to replace upstream response.', type: 'string' },
      after_body: { description: 'body after the modification of filter phase.', type: 'string' },
      headers: { description: 'new headers for response', type: 'object', minProperties: 1 },
    },
    anyOf: [{ required: ['before_body'] }, { required: ['body'] }, { required: ['after_body'] }],
    minProperties: 1,
  },
  headerFilter(conf, ctx) {
    if (!conf.headers) return;
    const entries = Object.entries(conf.headers);
    // APISIX sets none when a name is empty or a value is not a string or number
    if (entries.some(([k, v]) => k === '' || (typeof v !== 'string' && typeof v !== 'number'))) return;
    for (const [k, v] of entries) ctx.setResponseHeader(k, String(v));
  },
  bodyFilter(conf, ctx, piece) {
    let { chunk, eof } = piece;
    if (conf.body !== undefined) {
      chunk = Buffer.from(conf.body);
      eof = true;
    }
    if (conf.before_body !== undefined && !ctx.state.has(BEFORE_SENT)) {
      chunk = Buffer.concat([Buffer.from(conf.before_body), chunk]);
      ctx.state.set(BEFORE_SENT, true);
    }
    if (eof && conf.after_body !== undefined) chunk = Buffer.concat([chunk, Buffer.from(conf.after_body)]);
    return { chunk, eof };
  },
};
