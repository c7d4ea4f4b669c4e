/**
 * ngx_stream_set_module: `set $variable value;` in a server. The values
 * (strings with variables) are computed in order in the preaccess phase,
 * so access rules, limit_conn keys, proxy_pass and the access log see
 * them; a variable set nowhere else reads as an empty string.
 */
import { defineSlot } from '../../conf/context.ts';
import type { ConfContext } from '../../conf/context.ts';
import { Ctx } from '../../conf/directive.ts';
import type { ConfNode } from '../../conf/parser.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { DECLINED, streamMainOf } from '../conf.ts';
import type { StreamModule } from '../conf.ts';
import type { StreamSession } from '../session.ts';

interface SetCommand {
  index: number;
  value: ComplexValue<StreamSession>;
}

/** The `set` lines of a server, in order (nginx keeps them per server, not inherited). */
const setSrv = defineSlot<{ commands: SetCommand[] }>('stream_set_srv', () => ({ commands: [] }));

function readSet(cf: ConfContext, node: ConfNode): void {
  const vars = streamMainOf(cf).variables;
  const [target, text] = node.args;
  if (!target.startsWith('$')) throw cf.error(`invalid variable name "${target}"`);
  const name = target.slice(1);
  const def = vars.lookup(name);
  if (def && !def.changeable && !def.set) throw cf.error(`the duplicate "${name}" variable`);
  if (!def) vars.define({ name, get: () => '', changeable: true });
  const index = vars.index(name);
  cf.get(setSrv).commands.push({ index, value: compileComplex(cf, vars, text) });
}

function setHandler(s: StreamSession): number {
  const commands = s.level.get(setSrv).commands;
  const vars = s.main.variables;
  for (const c of commands) vars.assign(s, c.index, c.value.constant ?? c.value.evaluate(s));
  return DECLINED;
}

export const streamSetModule: StreamModule = {
  name: 'ngx_stream_set_module',
  directives: [{ name: 'set', contexts: Ctx.STREAM_SERVER, args: 2, handler: readSet }],
  postconfiguration(stream) {
    stream.addPhaseHandler('PREACCESS', setHandler);
  },
};
