/** The plugins the gateway knows, one file each (APISIX's name, priority and schema). */
import { basicAuth } from './basic-auth.ts';
import { gzip } from './gzip.ts';
import { hmacAuth } from './hmac-auth.ts';
import { jwtAuth } from './jwt-auth.ts';
import { keyAuth } from './key-auth.ts';
import { limitCount } from './limit-count.ts';
import { limitConn } from './limit-conn.ts';
import { limitReq } from './limit-req.ts';
import { mocking } from './mocking.ts';
import { consumerRestriction } from './consumer-restriction.ts';
import { cors } from './cors.ts';
import { examplePlugin } from './example-plugin.ts';
import { faultInjection } from './fault-injection.ts';
import { ipRestriction } from './ip-restriction.ts';
import { proxyRewrite } from './proxy-rewrite.ts';
import { realIp } from './real-ip.ts';
import { redirect } from './redirect.ts';
import { refererRestriction } from './referer-restriction.ts';
import { requestId } from './request-id.ts';
import { prometheus } from './prometheus.ts';
import { responseRewrite } from './response-rewrite.ts';
import { serverlessPreFunction } from './serverless-pre-function.ts';
import { serverlessPostFunction } from './serverless-post-function.ts';
import { trafficSplit } from './traffic-split.ts';
import { uaRestriction } from './ua-restriction.ts';
import { uriBlocker } from './uri-blocker.ts';
import { csrf } from './csrf.ts';
import { grpcTranscode } from './grpc-transcode.ts';
import { httpLogger } from './http-logger.ts';
import { ldapAuth } from './ldap-auth.ts';
import { ldapAuthAdvanced } from './ldap-auth-advanced.ts';
import { nodeStatus } from './node-status.ts';
import { udpLogger } from './udp-logger.ts';
import { requestValidation } from './request-validation.ts';
import { apiBreaker } from './api-breaker.ts';
import { clientControl } from './client-control.ts';
import { proxyControl } from './proxy-control.ts';
import { echo } from './echo.ts';
import { tcpLogger } from './tcp-logger.ts';
import { fileLogger } from './file-logger.ts';
import { lokiLogger } from './loki-logger.ts';
import { elasticsearchLogger } from './elasticsearch-logger.ts';
import { clickhouseLogger } from './clickhouse-logger.ts';
import { splunkHecLogging } from './splunk-hec-logging.ts';
import { syslog } from './syslog.ts';
import { forwardAuth } from './forward-auth.ts';
import { multiAuth, useAuthPlugins } from './multi-auth.ts';
import { proxyMirror } from './proxy-mirror.ts';
import { brotli } from './brotli.ts';
import type { GatewayPlugin } from './registry.ts';

export const builtinPlugins: GatewayPlugin[] = [
  basicAuth, hmacAuth, jwtAuth, keyAuth, gzip, brotli, limitCount, limitConn, limitReq, consumerRestriction, cors, ipRestriction, proxyRewrite, realIp, redirect, requestId, responseRewrite, prometheus,
  serverlessPreFunction, serverlessPostFunction, trafficSplit, examplePlugin,
  faultInjection, mocking, uriBlocker, uaRestriction, refererRestriction, csrf,
  requestValidation, apiBreaker, clientControl, proxyControl, echo,
  httpLogger, tcpLogger, udpLogger, fileLogger, lokiLogger, elasticsearchLogger, clickhouseLogger, splunkHecLogging, syslog,
  forwardAuth, multiAuth, proxyMirror,
  // known by their schemas only: the data plane refuses a request that would run them (not-implemented.ts)
  ldapAuth, ldapAuthAdvanced, grpcTranscode,
  nodeStatus, // no phase functions in APISIX either; its /apisix/status API is not served
];

// the plugins multi-auth's auth_plugins may name
useAuthPlugins(builtinPlugins);
