/**
 * traffic-split (apisix/plugins/traffic-split.lua): the first rule whose
 * `match` holds (any of its `vars` expressions; a rule without `match`
 * always holds) splits the request among its `weighted_upstreams` by weight,
 * with lua-resty-balancer's round robin as APISIX does (per worker, per
 * route version). A weighted upstream names an `upstream_id`, or has an
 * inline `upstream` (of which APISIX keeps name, type, hash_on, key,
 * pass_host, upstream_host, nodes, timeout and scheme), or neither: then
 * the route's own upstream. No rule holds: the route's upstream. An
 * `upstream_id` that does not exist: 500 `failed to fetch upstream info by
 * upstream id: ID`.
 */
import { checkVars } from '../admin/vars-check.ts';
import { UpstreamBalancer } from '../dataplane/balancer.ts';
import { compileVars } from '../router/expr.ts';
import type { Expr } from '../router/expr.ts';
import type { UpstreamConf } from '../router/config-view.ts';
import { idSchema, upstreamSchema } from '../schema/resources.ts';
import type { GatewayPlugin } from './registry.ts';

interface WeightedUpstream { upstream_id?: string | number; upstream?: UpstreamConf; weight: number }
interface Rule { match?: Array<{ vars?: unknown[] }>; weighted_upstreams?: WeightedUpstream[] }
interface TrafficSplitConf { rules?: Rule[] }

/** A rule as run: its match tests (undefined: always) and the picker over its weighted upstreams. */
interface CompiledRule { tests: Array<Expr | undefined> | undefined; weighted: WeightedUpstream[]; picker: UpstreamBalancer; inline: Array<UpstreamConf | undefined> }

const compiled = new WeakMap<TrafficSplitConf, CompiledRule[]>();
const NOTHING_TRIED = new Set<string>();

/** The fields of an inline upstream APISIX's set_upstream keeps. */
function keptFields(u: UpstreamConf): UpstreamConf {
  const { name, type, hash_on, pass_host, upstream_host, key, nodes, timeout, scheme } = u as UpstreamConf & { name?: string };
  return { name, type: type ?? 'roundrobin', hash_on, pass_host, upstream_host, key, nodes, timeout, scheme } as UpstreamConf;
}

function compile(conf: TrafficSplitConf): CompiledRule[] {
  let rules = compiled.get(conf);
  if (rules) return rules;
  rules = (conf.rules ?? []).map((rule) => {
    const weighted = rule.weighted_upstreams ?? [{ weight: 1 }];
    // the weighted upstreams are the "nodes" of a round robin, as resty.roundrobin balances them in APISIX
    const picker = new UpstreamBalancer({ type: 'roundrobin', nodes: weighted.map((w, i) => ({ host: String(i), port: 1, weight: w.weight ?? 1 })) } as UpstreamConf);
    return {
      tests: rule.match?.map((m) => compileVars(m.vars)),
      weighted, picker,
      inline: weighted.map((w) => (w.upstream ? keptFields(w.upstream) : undefined)),
    };
  });
  compiled.set(conf, rules);
  return rules;
}

export const trafficSplit: GatewayPlugin<TrafficSplitConf> = {
  name: 'traffic-split', version: 0.1, priority: 966,
  schema: {
    type: 'object',
    properties: {
      rules: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            match: { type: 'array', items: { type: 'object', properties: { vars: { type: 'array' } } } },
            weighted_upstreams: {
              type: 'array', minItems: 1, maxItems: 20, default: [{ weight: 1 }],
              items: {
                type: 'object',
                properties: { upstream_id: idSchema, upstream: upstreamSchema, weight: { type: 'integer', default: 1, minimum: 0 } },
              },
            },
          },
        },
      },
    },
  },
  checkConf(conf) {
    for (const rule of conf.rules ?? []) {
      for (const m of rule.match ?? []) {
        const err = checkVars(m.vars ?? []);
        if (err) return err;
      }
    }
    return undefined;
  },
  access(conf, ctx) {
    const rules = compile(conf);
    let chosen: CompiledRule | undefined;
    for (const rule of rules) {
      for (const w of rule.weighted) {
        if (w.upstream_id !== undefined && !ctx.upstreamById(String(w.upstream_id))) {
          return { status: 500, body: `failed to fetch upstream info by upstream id: ${w.upstream_id}` };
        }
      }
      // an empty vars expression holds (lua-resty-expr's with no rules)
      if (!rule.tests || rule.tests.some((t) => !t || t(ctx.variable))) {
        chosen = rule;
        break;
      }
    }
    if (!chosen) return undefined;
    const i = Number(chosen.picker.pick('', NOTHING_TRIED)?.host ?? -1);
    const w = chosen.weighted[i];
    if (!w) return undefined;
    const routeId = ctx.route?.id ?? '';
    if (w.upstream_id !== undefined) ctx.useUpstream(ctx.upstreamById(String(w.upstream_id))!, `upstream/${w.upstream_id}`);
    else if (chosen.inline[i]) ctx.useUpstream(chosen.inline[i]!, `traffic-split/route_${routeId}_${rules.indexOf(chosen)}_${i}`);
    return undefined;
  },
};
