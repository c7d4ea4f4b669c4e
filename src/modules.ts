/**
 * Every module built into Gatehouse. The order here does not decide when
 * phase handlers and filters run: each declares its order when installed
 * (src/http/http-conf.ts).
 */
import type { CycleModule } from './core/cycle.ts';
import { coreModule } from './core/modules/core.ts';
import { httpCoreModule } from './http/core/index.ts';
import { sslModule } from './http/modules/ssl/index.ts';
import { http2Module } from './http/http2/module.ts';
import { logModule } from './http/modules/log/index.ts';
import { rewriteModule } from './http/modules/rewrite.ts';
import { mapModule } from './http/modules/map.ts';
import { geoModule } from './http/modules/geo.ts';
import { indexModule } from './http/modules/index-module.ts';
import { randomIndexModule } from './http/modules/random-index.ts';
import { staticModule } from './http/modules/static.ts';
import { tryFilesModule } from './http/core/try-files.ts';
import { mirrorModule } from './http/modules/mirror.ts';
import { accessModule } from './http/modules/access.ts';
import { authBasicModule } from './http/modules/auth-basic.ts';
import { authRequestModule } from './http/modules/auth-request.ts';
import { limitReqModule } from './http/modules/limit-req.ts';
import { limitConnModule } from './http/modules/limit-conn.ts';
import { limitRateModule } from './http/modules/limit-rate.ts';
import { postActionModule } from './http/modules/post-action.ts';
import { notModifiedModule } from './http/modules/not-modified.ts';
import { headersModule } from './http/modules/headers.ts';
import { useridModule } from './http/modules/userid.ts';
import { davModule } from './http/modules/dav.ts';
import { gunzipModule } from './http/modules/gunzip.ts';
import { gzipModule } from './http/modules/gzip.ts';
import { gzipStaticModule } from './http/modules/gzip-static.ts';
import { brotliFilterModule } from './http/modules/brotli/filter.ts';
import { brotliStaticModule } from './http/modules/brotli/static.ts';
import { rangeModule } from './http/modules/range.ts';
import { sliceModule } from './http/modules/slice.ts';
import { ssiModule } from './http/modules/ssi/index.ts';
import { subFilterModule } from './http/modules/sub-filter.ts';
import { additionModule } from './http/modules/addition.ts';
import { charsetModule } from './http/modules/charset/index.ts';
import { upstreamModule } from './http/upstream/module.ts';
import { proxyModule } from './http/modules/proxy/index.ts';
import { uwsgiModule } from './http/modules/uwsgi.ts';
import { grpcModule } from './http/modules/grpc/index.ts';
import { memcachedModule } from './http/modules/memcached.ts';
import { scgiModule } from './http/modules/scgi.ts';
import { fastcgiModule } from './http/modules/fastcgi/index.ts';
import { autoindexModule } from './http/modules/autoindex.ts';
import { realipModule } from './http/modules/realip.ts';
import { emptyGifModule } from './http/modules/empty-gif.ts';
import { stubStatusModule } from './http/modules/stub-status.ts';
import { gatewayModule } from './http/modules/gateway.ts';
import { acmeModule } from './http/modules/acme/index.ts';
import { refererModule } from './http/modules/referer.ts';
import { secureLinkModule } from './http/modules/secure-link.ts';
import { splitClientsModule } from './http/modules/split-clients.ts';
import { luaModule } from './http/modules/lua/index.ts';
import { echoModule } from './http/modules/echo.ts';
import { headersMoreModule } from './http/modules/headers-more.ts';
import { setMiscModule } from './http/modules/set-misc.ts';
import { streamCoreModule } from './stream/modules/core.ts';
import { streamLogModule } from './stream/modules/log.ts';
import { streamProxyModule } from './stream/modules/proxy.ts';
import { streamUpstreamModule } from './stream/modules/upstream.ts';
import { streamAccessModule } from './stream/modules/access.ts';
import { streamMapModule } from './stream/modules/map.ts';
import { streamReturnModule } from './stream/modules/return.ts';
import { streamGeoModule } from './stream/modules/geo.ts';
import { streamSplitClientsModule } from './stream/modules/split-clients.ts';
import { streamSetModule } from './stream/modules/set.ts';
import { streamSslPrereadModule } from './stream/modules/ssl-preread.ts';
import { streamSslModule } from './stream/modules/ssl.ts';
import { streamPassModule } from './stream/modules/pass.ts';
import { streamGatewayModule } from './stream/modules/gateway.ts';
import { streamRealipModule } from './stream/modules/realip.ts';
import { streamLimitConnModule } from './stream/modules/limit-conn.ts';
import { streamUpstreamHashModule } from './stream/modules/upstream-hash.ts';
import { streamUpstreamLeastConnModule } from './stream/modules/upstream-least-conn.ts';
import { streamUpstreamRandomModule } from './stream/modules/upstream-random.ts';
import { streamUpstreamZoneModule } from './stream/modules/upstream-zone.ts';

export const modules: CycleModule[] = [
  coreModule,
  httpCoreModule,
  sslModule,
  http2Module,
  logModule,
  rewriteModule,
  mapModule,
  geoModule,
  splitClientsModule,
  refererModule,
  secureLinkModule,
  emptyGifModule,
  stubStatusModule,
  gatewayModule,
  upstreamModule,
  proxyModule,
  fastcgiModule,
  uwsgiModule,
  grpcModule,
  scgiModule,
  memcachedModule,
  tryFilesModule,
  mirrorModule,
  indexModule,
  randomIndexModule,
  autoindexModule,
  staticModule,
  gzipStaticModule,
  brotliStaticModule,
  davModule,
  accessModule,
  authBasicModule,
  authRequestModule,
  realipModule,
  limitReqModule,
  limitConnModule,
  limitRateModule,
  postActionModule,
  notModifiedModule,
  headersModule,
  useridModule,
  subFilterModule,
  additionModule,
  charsetModule,
  ssiModule,
  gunzipModule,
  gzipModule,
  brotliFilterModule,
  rangeModule,
  sliceModule,
  luaModule,
  echoModule,
  headersMoreModule,
  setMiscModule,
  acmeModule,
  // stream {}: TCP proxying (src/stream)
  streamCoreModule,
  streamLogModule,
  streamProxyModule,
  streamUpstreamModule,
  streamAccessModule,
  streamMapModule,
  streamReturnModule,
  streamGeoModule,
  streamSplitClientsModule,
  streamRealipModule,
  streamSetModule,
  streamLimitConnModule,
  streamUpstreamHashModule,
  streamUpstreamLeastConnModule,
  streamUpstreamRandomModule,
  streamUpstreamZoneModule,
  streamSslModule,
  streamPassModule,
  streamSslPrereadModule,
  streamGatewayModule,
];
