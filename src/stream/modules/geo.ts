/**
 * ngx_stream_geo_module: `geo [$address] $variable { ... }` in the stream
 * block — a value by the client's address (or the address in a variable).
 * The table is the core's geo table, read as the http geo module reads it
 * but without `proxy` (stream has no X-Forwarded-For).
 */
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { geoValue, readGeoBlock } from '../../core/geo-table.ts';
import { parseAddr } from '../../core/inet.ts';
import { streamMainOf } from '../conf.ts';
import type { StreamModule } from '../conf.ts';
import type { StreamSession } from '../session.ts';

/** ngx_stream_geo_addr: the client's address, or the source variable's; undefined when it is not an address. */
function geoAddress(s: StreamSession, sourceIndex: number): Uint8Array | undefined {
  if (sourceIndex < 0) return s.listen.spec.path === undefined ? parseAddr(s.remoteAddress) : undefined;
  const text = s.main.variables.value(s, sourceIndex);
  return text === undefined ? undefined : parseAddr(text);
}

function geoBlock(cf: ConfContext, node: ConfNode): void {
  const vars = streamMainOf(cf).variables;
  const { name, sourceIndex, geo, volatile } = readGeoBlock(cf, node, vars);
  vars.define({ name, get: (s) => geoValue(geo, geoAddress(s, sourceIndex)), changeable: true, noCache: volatile });
}

export const streamGeoModule: StreamModule = {
  name: 'ngx_stream_geo_module',
  directives: [{ name: 'geo', contexts: Ctx.STREAM, args: [1, 2], block: true, handler: geoBlock }],
};
