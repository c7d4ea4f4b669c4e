/**
 * The Admin API's resource schemas, as APISIX declares them
 * (apisix/schema_def.lua): the same fields, bounds, patterns and
 * combinators, so that the same bodies pass and fail with the same
 * messages. Defaults are documentation only: the Admin API stores a body
 * as sent (APISIX ≥ 3.14).
 */
import type { Schema } from './validate.ts';

export const idSchema: Schema = {
  anyOf: [
    { type: 'string', minLength: 1, maxLength: 64, pattern: '^[a-zA-Z0-9-_.]+$' },
    { type: 'integer', minimum: 1 },
  ],
};

export const HOST_PATTERN = '^\\*$|^\\*?[0-9a-zA-Z-._\\[\\]:]+$';
const hostDef: Schema = { type: 'string', pattern: HOST_PATTERN };

const IPV4_SEG = '([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])';
const IPV4 = [IPV4_SEG, IPV4_SEG, IPV4_SEG, IPV4_SEG].join('\\.');
const IPV6 = '([a-fA-F0-9]{0,4}:){1,8}(:[a-fA-F0-9]{0,4}){0,8}([a-fA-F0-9]{0,4})?';
const ipDef: Schema[] = [
  { title: 'IPv4', type: 'string', format: 'ipv4' },
  { title: 'IPv4/CIDR', type: 'string', pattern: `^${IPV4}/([12]?[0-9]|3[0-2])$` },
  { title: 'IPv6', type: 'string', format: 'ipv6' },
  { title: 'IPv6/CIDR', type: 'string', pattern: `^${IPV6}/[0-9]{1,3}$` },
];
const remoteAddrDef: Schema = { type: 'string', anyOf: ipDef };

const labelsDef: Schema = {
  type: 'object',
  patternProperties: { '.*': { type: 'string', pattern: '^\\S+$', maxLength: 256, minLength: 1 } },
};
const nameDef: Schema = { type: 'string', maxLength: 256, minLength: 1 };
const descDef: Schema = { type: 'string', maxLength: 256 };
const timestampDef: Schema = { type: 'integer' };
const timeoutDef: Schema = {
  type: 'object',
  properties: {
    connect: { type: 'number', exclusiveMinimum: 0 },
    send: { type: 'number', exclusiveMinimum: 0 },
    read: { type: 'number', exclusiveMinimum: 0 },
  },
  required: ['connect', 'send', 'read'],
};
export const METHODS = ['GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'HEAD', 'OPTIONS', 'CONNECT', 'TRACE', 'PURGE'];
const methodSchema: Schema = { type: 'string', enum: METHODS };
const pluginsSchema: Schema = { type: 'object' };

/** id, name, desc, labels, create_time, update_time: on almost every resource. */
function common(extra: Record<string, Schema>, withName = true): Record<string, Schema> {
  return {
    id: idSchema,
    ...(withName ? { name: nameDef } : {}),
    desc: descDef, labels: labelsDef, create_time: timestampDef, update_time: timestampDef,
    ...extra,
  };
}

const statusList = (items: number[]): Schema => ({
  type: 'array', minItems: 1, items: { type: 'integer', minimum: 200, maximum: 599 }, uniqueItems: true, default: items,
});
const counter = (min: number, def: number): Schema => ({ type: 'integer', minimum: min, maximum: 254, default: def });

const activeCheck: Schema = {
  type: 'object',
  properties: {
    type: { type: 'string', enum: ['http', 'https', 'tcp'], default: 'http' },
    timeout: { type: 'number', default: 1 },
    concurrency: { type: 'integer', default: 10 },
    host: hostDef,
    port: { type: 'integer', minimum: 1, maximum: 65535 },
    http_method: { type: 'string', enum: METHODS, default: 'GET' },
    http_path: { type: 'string', default: '/' },
    http_req_body: { type: 'string', default: '' },
    https_verify_certificate: { type: 'boolean', default: true },
    healthy: {
      type: 'object',
      properties: { interval: { type: 'integer', minimum: 1, default: 1 }, http_statuses: statusList([200, 302]), successes: counter(1, 2) },
    },
    unhealthy: {
      type: 'object',
      properties: {
        interval: { type: 'integer', minimum: 1, default: 1 },
        http_statuses: statusList([429, 404, 500, 501, 502, 503, 504, 505]),
        http_failures: counter(1, 5), tcp_failures: counter(1, 2), timeouts: counter(1, 3),
      },
    },
    req_headers: { type: 'array', minItems: 1, items: { type: 'string', uniqueItems: true } },
  },
};

const passiveCheck: Schema = {
  type: 'object',
  properties: {
    type: { type: 'string', enum: ['http', 'https', 'tcp'], default: 'http' },
    healthy: {
      type: 'object',
      properties: {
        http_statuses: statusList([200, 201, 202, 203, 204, 205, 206, 207, 208, 226, 300, 301, 302, 303, 304, 305, 306, 307, 308]),
        successes: counter(0, 5),
      },
    },
    unhealthy: {
      type: 'object',
      properties: {
        http_statuses: statusList([429, 500, 503]),
        tcp_failures: counter(0, 2), timeouts: counter(0, 7), http_failures: counter(0, 5),
      },
    },
  },
};

const nodesSchema: Schema = {
  anyOf: [
    { type: 'object', patternProperties: { '.*': { type: 'integer', minimum: 0 } } },
    {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          host: hostDef,
          port: { type: 'integer', minimum: 1, maximum: 65535 },
          weight: { type: 'integer', minimum: 0 },
          priority: { type: 'integer', default: 0 },
          metadata: { type: 'object' },
        },
        required: ['host', 'weight'],
      },
    },
  ],
};

const certificateDef: Schema = { type: 'string', minLength: 128, maxLength: 64 * 1024 };
const privateKeyDef: Schema = { type: 'string', minLength: 64, maxLength: 64 * 1024 };

export const upstreamSchema: Schema = {
  type: 'object',
  properties: common({
    nodes: nodesSchema,
    retries: { type: 'integer', minimum: 0 },
    retry_timeout: { type: 'number', minimum: 0 },
    timeout: timeoutDef,
    tls: {
      type: 'object',
      properties: {
        client_cert_id: idSchema, client_cert: certificateDef, client_key: privateKeyDef,
        verify: { type: 'boolean', default: false },
      },
      dependencies: {
        client_cert: { required: ['client_key'] },
        client_key: { required: ['client_cert'] },
        client_cert_id: { not: { required: ['client_cert', 'client_key'] } },
      },
    },
    keepalive_pool: {
      type: 'object',
      properties: {
        size: { type: 'integer', default: 320, minimum: 1 },
        idle_timeout: { type: 'number', default: 60, minimum: 0 },
        requests: { type: 'integer', default: 1000, minimum: 1 },
      },
    },
    type: { type: 'string', default: 'roundrobin' },
    checks: {
      type: 'object',
      properties: { active: activeCheck, passive: passiveCheck },
      anyOf: [{ required: ['active'] }, { required: ['active', 'passive'] }],
    },
    hash_on: { type: 'string', default: 'vars', enum: ['vars', 'header', 'cookie', 'consumer', 'vars_combinations'] },
    key: { type: 'string' },
    scheme: { default: 'http', enum: ['grpc', 'grpcs', 'http', 'https', 'tcp', 'tls', 'udp', 'kafka'] },
    discovery_type: { type: 'string' },
    discovery_args: { type: 'object', properties: { namespace_id: { type: 'string' }, group_name: { type: 'string' } } },
    pass_host: { type: 'string', enum: ['pass', 'node', 'rewrite'], default: 'pass' },
    upstream_host: hostDef,
    service_name: { type: 'string', maxLength: 256, minLength: 1 },
  }),
  oneOf: [{ required: ['nodes'] }, { required: ['service_name', 'discovery_type'] }],
  additionalProperties: false,
};

export const UPSTREAM_HASH_VARS = '^((uri|server_name|server_addr|request_uri|remote_port|remote_addr|query_string|host|hostname|mqtt_client_id)|arg_[0-9a-zA-z_-]+)$';
export const UPSTREAM_HASH_HEADER = '^[a-zA-Z0-9-_]+$';

const exactlyOneOf = (a: string, b: string): Schema => ({
  oneOf: [{ not: { anyOf: [{ required: [a] }, { required: [b] }] } }, { required: [a] }, { required: [b] }],
});

export const routeSchema: Schema = {
  type: 'object',
  properties: common({
    uri: { type: 'string', minLength: 1, maxLength: 4096 },
    uris: { type: 'array', items: { type: 'string' }, minItems: 1, uniqueItems: true },
    priority: { type: 'integer', default: 0 },
    methods: { type: 'array', items: methodSchema, uniqueItems: true },
    host: hostDef,
    hosts: { type: 'array', items: hostDef, minItems: 1, uniqueItems: true },
    remote_addr: remoteAddrDef,
    remote_addrs: { type: 'array', items: remoteAddrDef, minItems: 1, uniqueItems: true },
    timeout: timeoutDef,
    vars: { type: 'array' },
    filter_func: { type: 'string', minLength: 10, pattern: '^function' },
    script: { type: 'string', minLength: 10, maxLength: 102400 },
    script_id: idSchema,
    plugins: pluginsSchema,
    plugin_config_id: idSchema,
    upstream: upstreamSchema,
    service_id: idSchema,
    upstream_id: idSchema,
    enable_websocket: { type: 'boolean' },
    status: { type: 'integer', enum: [1, 0], default: 1 },
  }),
  allOf: [
    { oneOf: [{ required: ['uri'] }, { required: ['uris'] }] },
    exactlyOneOf('host', 'hosts'),
    exactlyOneOf('remote_addr', 'remote_addrs'),
  ],
  anyOf: [...['uri', 'uris'].flatMap((u) => ['plugins', 'upstream', 'upstream_id', 'service_id'].map((x) => ({ required: [x, u] }))),
    { required: ['script', 'uri'] }, { required: ['script', 'uris'] }],
  not: { anyOf: [{ required: ['script', 'plugins'] }, { required: ['script', 'plugin_config_id'] }] },
  additionalProperties: false,
};

export const serviceSchema: Schema = {
  type: 'object',
  properties: common({
    plugins: pluginsSchema,
    upstream: upstreamSchema,
    upstream_id: idSchema,
    script: { type: 'string', minLength: 10, maxLength: 102400 },
    enable_websocket: { type: 'boolean' },
    hosts: { type: 'array', items: hostDef, minItems: 1, uniqueItems: true },
  }),
  additionalProperties: false,
};

export const consumerSchema: Schema = {
  type: 'object',
  properties: {
    id: idSchema,
    username: { type: 'string', minLength: 1, maxLength: 256, pattern: '^[a-zA-Z0-9_\\-]+$' },
    desc: descDef, labels: labelsDef, create_time: timestampDef, update_time: timestampDef,
    group_id: idSchema,
    plugins: pluginsSchema,
  },
  required: ['username'],
  additionalProperties: false,
};

export const credentialSchema: Schema = {
  type: 'object',
  properties: {
    id: { oneOf: [idSchema, { type: 'string', minLength: 15, maxLength: 128, pattern: '^[a-zA-Z0-9-_]+/credentials/[a-zA-Z0-9-_.]+$' }] },
    name: nameDef, desc: descDef, labels: labelsDef, create_time: timestampDef, update_time: timestampDef,
    plugins: { type: 'object', maxProperties: 1 },
  },
  additionalProperties: false,
};

/**
 * Gatehouse's `acme` field of an SSL object: the certificate is ordered from
 * an issuer of config.yaml's `gatehouse.acme.issuers` (src/gateway/acme/);
 * `status` is written by the gateway (what GET shows).
 */
const acmeDef: Schema = {
  type: 'object',
  properties: {
    issuer: { type: 'string', minLength: 1 },
    fallback: { type: 'array', items: { type: 'string', minLength: 1 }, uniqueItems: true },
    key: { type: 'string', enum: ['ecdsa:256', 'ecdsa:384', 'ecdsa:521', 'rsa:2048', 'rsa:3072', 'rsa:4096'] },
    status: { type: 'object' },
  },
  required: ['issuer'],
  additionalProperties: false,
};

export const sslSchema: Schema = {
  type: 'object',
  properties: common({
    type: { type: 'string', default: 'server', enum: ['server', 'client'] },
    cert: certificateDef,
    key: privateKeyDef,
    sni: { type: 'string', pattern: HOST_PATTERN },
    snis: { type: 'array', items: { type: 'string', pattern: HOST_PATTERN }, minItems: 1 },
    certs: { type: 'array', items: certificateDef },
    keys: { type: 'array', items: privateKeyDef },
    client: {
      type: 'object',
      properties: {
        ca: certificateDef,
        depth: { type: 'integer', minimum: 0, default: 1 },
        skip_mtls_uri_regex: { type: 'array', minItems: 1, uniqueItems: true, items: { type: 'string' } },
      },
      required: ['ca'],
    },
    status: { type: 'integer', enum: [1, 0], default: 1 },
    ssl_protocols: { type: 'array', maxItems: 3, uniqueItems: true, items: { enum: ['TLSv1.1', 'TLSv1.2', 'TLSv1.3'] } },
    acme: acmeDef,
  }, false),
  if: { properties: { type: { enum: ['server'] } } },
  // Gatehouse: with `acme` the certificate and key come from the issuer (written in by the gateway)
  then: { oneOf: [{ required: ['sni', 'key', 'cert'] }, { required: ['snis', 'key', 'cert'] }, { required: ['sni', 'acme'], not: { required: ['key'] } }, { required: ['snis', 'acme'], not: { required: ['key'] } }] },
  else: { required: ['key', 'cert'] },
  additionalProperties: false,
};

export const protoSchema: Schema = {
  type: 'object',
  properties: common({ content: { type: 'string', minLength: 1, maxLength: 1024 * 1024 } }),
  required: ['content'],
  additionalProperties: false,
};

export const globalRuleSchema: Schema = {
  type: 'object',
  properties: { id: idSchema, create_time: timestampDef, update_time: timestampDef, plugins: pluginsSchema },
  required: ['id', 'plugins'],
  additionalProperties: false,
};

export const streamRouteSchema: Schema = {
  type: 'object',
  properties: common({
    remote_addr: remoteAddrDef,
    server_addr: { type: 'string', anyOf: ipDef },
    server_port: { type: 'integer', minimum: 1, maximum: 65535 },
    sni: { type: 'string', pattern: HOST_PATTERN },
    upstream: upstreamSchema,
    upstream_id: idSchema,
    service_id: idSchema,
    plugins: pluginsSchema,
    protocol: {
      type: 'object',
      properties: {
        name: { type: 'string' },
        superior_id: idSchema,
        conf: { type: 'object' },
        logger: {
          type: 'array',
          items: {
            properties: { name: { type: 'string' }, filter: { type: 'array' }, conf: { type: 'object' } },
            dependencies: { name: ['conf'] },
            additionalProperties: false,
          },
        },
      },
      required: ['name'],
    },
  }),
  additionalProperties: false,
};

export const pluginConfigSchema: Schema = {
  type: 'object',
  properties: common({ plugins: pluginsSchema }, false),
  required: ['id', 'plugins'],
  additionalProperties: false,
};
(pluginConfigSchema.properties as Record<string, Schema>).name = { type: 'string' };

export const consumerGroupSchema: Schema = {
  type: 'object',
  properties: common({ plugins: pluginsSchema }),
  required: ['id', 'plugins'],
  additionalProperties: false,
};

/** secrets/{manager}: APISIX's vault, aws and gcp managers' schemas (apisix/secret/*.lua), trimmed to their main fields; the id (`vault/1`) is not checked by them. */
export const secretSchemas: Record<string, Schema> = {
  vault: {
    type: 'object',
    properties: {
      create_time: timestampDef, update_time: timestampDef,
      uri: { type: 'string', pattern: '^[^\\/]+:\\/\\/([\\da-zA-Z.-]+|\\[[\\da-fA-F:]+\\])(:\\d+)?' },
      prefix: { type: 'string' }, token: { type: 'string' }, namespace: { type: 'string' },
    },
    required: ['uri', 'prefix', 'token'],
  },
  aws: {
    type: 'object',
    properties: {
      create_time: timestampDef, update_time: timestampDef,
      access_key_id: { type: 'string' }, secret_access_key: { type: 'string' }, session_token: { type: 'string' },
      region: { type: 'string', default: 'us-east-1' }, endpoint_url: { type: 'string' },
    },
    required: ['access_key_id', 'secret_access_key'],
  },
  gcp: {
    type: 'object',
    properties: { create_time: timestampDef, update_time: timestampDef, auth_config: { type: 'object' }, auth_file: { type: 'string' } },
  },
};
