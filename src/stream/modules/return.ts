/**
 * ngx_stream_return_module: `return value;` sends the value (variables
 * allowed) to the client and closes the connection.
 */
import { defineSlot } from '../../conf/context.ts';
import { unique } from '../../conf/setters.ts';
import { Ctx } from '../../conf/directive.ts';
import { LogLevel } from '../../core/error-log.ts';
import { compileComplex } from '../../core/variables.ts';
import type { ComplexValue } from '../../core/variables.ts';
import { Status, streamMainOf, streamServerOf } from '../conf.ts';
import type { StreamModule } from '../conf.ts';
import type { StreamSession } from '../session.ts';

const returnSrv = defineSlot<{ text?: ComplexValue<StreamSession> }>('stream_return_srv', () => ({}));

/** How long nginx waits for a client to take the text. */
const SEND_TIMEOUT_MS = 5000;

function returnHandler(s: StreamSession): void {
  s.action = 'returning text';
  const value = s.level.get(returnSrv).text!;
  const text = value.constant ?? value.evaluate(s);
  if (text === '') {
    s.finalize(Status.OK);
    return;
  }
  const socket = s.socket;
  socket.setTimeout(SEND_TIMEOUT_MS, () => {
    s.error(LogLevel.info, 'connection timed out (110: Connection timed out)');
    s.finalize(Status.OK);
  });
  socket.write(text, 'latin1', () => s.finalize(Status.OK));
}

export const streamReturnModule: StreamModule = {
  name: 'ngx_stream_return_module',
  directives: [{
    name: 'return', contexts: Ctx.STREAM_SERVER, args: 1,
    handler: unique(returnSrv, 'text', (cf, node, conf) => {
      conf.text = compileComplex(cf, streamMainOf(cf).variables, node.args[0]);
      streamServerOf(cf).handler = returnHandler;
    }),
  }],
};
