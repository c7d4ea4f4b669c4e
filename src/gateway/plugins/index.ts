/**
 * The plugins the gateway knows, one file each. Those not yet written in
 * full (issue 11: the data plane) are listed with APISIX's name and
 * priority and an object schema, so routes using them are accepted and
 * `/plugins/list` names them.
 */
import { basicAuth } from './basic-auth.ts';
import { gzip } from './gzip.ts';
import { keyAuth } from './key-auth.ts';
import { limitCount } from './limit-count.ts';
import { limitConn } from './limit-conn.ts';
import { limitReq } from './limit-req.ts';
import { consumerRestriction } from './consumer-restriction.ts';
import { cors } from './cors.ts';
import { examplePlugin } from './example-plugin.ts';
import { ipRestriction } from './ip-restriction.ts';
import { proxyRewrite } from './proxy-rewrite.ts';
import { realIp } from './real-ip.ts';
import { redirect } from './redirect.ts';
import { requestId } from './request-id.ts';
import { prometheus } from './prometheus.ts';
import { responseRewrite } from './response-rewrite.ts';
import type { GatewayPlugin } from './registry.ts';

const PENDING: Array<[string, number]> = [
  ['serverless-pre-function', 10000],
  ['traffic-split', 966],
  ['serverless-post-function', -2000],
];

export const builtinPlugins: GatewayPlugin[] = [
  basicAuth, keyAuth, gzip, limitCount, limitConn, limitReq, consumerRestriction, cors, ipRestriction, proxyRewrite, realIp, redirect, requestId, responseRewrite, prometheus, examplePlugin,
  ...PENDING.map(([name, priority]): GatewayPlugin => ({ name, version: 0.1, priority, schema: { type: 'object' } })),
];
