/**
 * ngx_http_empty_gif_module: `empty_gif` answers GET and HEAD with nginx's
 * 43-byte transparent 1×1 GIF (Last-Modified 28 Sep 1970, as nginx's), and
 * any other method with 405.
 */
import { Ctx } from '../../conf/directive.ts';
import { DONE } from '../http-conf.ts';
import type { HttpModule, LocationConf } from '../http-conf.ts';
import type { HttpRequest } from '../request.ts';
import { sendSimple } from '../response.ts';

/** The minimal single-pixel transparent GIF nginx sends. */
const EMPTY_GIF = Buffer.from([
  0x47, 0x49, 0x46, 0x38, 0x39, 0x61, // GIF89a
  0x01, 0x00, 0x01, 0x00, // 1×1
  0x80, 0x01, 0x00, // global 1-bit color table, background #1, no aspect ratio
  0x00, 0x00, 0x00, 0xff, 0xff, 0xff, // black, white
  0x21, 0xf9, 0x04, 0x01, 0x00, 0x00, 0x01, 0x00, // graphic control: color #1 transparent
  0x2c, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, // image descriptor
  0x02, 0x02, 0x4c, 0x01, 0x00, // LZW data: clear, 1, end
  0x3b, // trailer
]);

/** nginx's r->headers_out.last_modified_time for the GIF (seconds). */
const LAST_MODIFIED = 23349600;

async function emptyGifHandler(r: HttpRequest): Promise<number> {
  if (r.method !== 'GET' && r.method !== 'HEAD') return 405;
  r.lastModified = LAST_MODIFIED * 1000;
  await sendSimple(r, 200, EMPTY_GIF, 'image/gif');
  return DONE;
}

export const emptyGifModule: HttpModule = {
  name: 'ngx_http_empty_gif_module',
  directives: [
    {
      name: 'empty_gif', contexts: Ctx.LOCATION, args: 0,
      handler(cf) { (cf.data.location as LocationConf).contentHandler = emptyGifHandler; },
    },
  ],
};
