/**
 * file-logger (apisix/plugins/file-logger.lua): each request's log entry
 * (log-entry.ts) appended to `path` (or the plugin metadata's) as one JSON
 * line, when the conf's `match` expressions (any of them) hold. Files stay
 * open per path in each worker and are reopened on USR1 (core/reopen.ts),
 * so logrotate's rename moves the writes to the new file as APISIX's
 * reopen does.
 */
import fs from 'node:fs';
import { onReopen } from '../../core/reopen.ts';
import type { GatewayPlugin } from './registry.ts';
import { bodyLogProperties } from './batch-schema.ts';
import { pluginLog } from './batch-processor.ts';
import { bodyLogPhases, logEntry } from './log-entry.ts';
import { exprError } from '../admin/vars-check.ts';
import type { BodyLogConf } from './log-entry.ts';

interface FileLoggerConf extends BodyLogConf { path?: string }

const NO_PATH = 'property "path" is not set in either the plugin conf or the metadata';

/** path → descriptor opened for appending, in this worker. */
const open = new Map<string, number>();
let unhook: (() => void) | undefined;

/** USR1: each file opened again by its path, the old descriptor closed; one that fails keeps the old. */
function reopenFiles(): string[] {
  const failed: string[] = [];
  for (const [path, fd] of open) {
    try {
      open.set(path, fs.openSync(path, 'a'));
      fs.closeSync(fd);
    } catch (e) {
      failed.push(`failed to reopen file-logger file "${path}": ${(e as Error).message}`);
    }
  }
  return failed;
}

function descriptorOf(path: string): number {
  let fd = open.get(path);
  if (fd === undefined) {
    fd = fs.openSync(path, 'a');
    open.set(path, fd);
    unhook ??= onReopen(reopenFiles);
  }
  return fd;
}

/** write_file_data: the line in one write, so lines of several workers never interleave. */
function writeLine(path: string, entry: unknown): void {
  try {
    fs.writeSync(descriptorOf(path), JSON.stringify(entry) + '\n');
  } catch (e) {
    pluginLog().error(`failed to write file: ${path}, error info: ${(e as Error).message}`);
  }
}

export const fileLogger: GatewayPlugin<FileLoggerConf> = {
  name: 'file-logger', version: 0.1, priority: 399,
  schema: {
    type: 'object',
    properties: {
      path: { type: 'string' },
      ...bodyLogProperties,
      match: { type: 'array', maxItems: 20, items: { type: 'array' } },
    },
  },
  metadataSchema: {
    type: 'object',
    properties: { path: { type: 'string' }, log_format: { type: 'object' }, log_format_extra: { type: 'object' } },
  },
  async checkConf(conf, metadata) {
    // APISIX's file-logger checks its `match` (as one expression), not the body expressions
    const err = conf.match && exprError(conf.match);
    if (err) return `failed to validate the 'match' expression: ${err}`;
    if (conf.path !== undefined) return undefined;
    return typeof (await metadata())?.path === 'string' ? undefined : NO_PATH;
  },
  ...bodyLogPhases<FileLoggerConf>(),
  log(conf, ctx) {
    const entry = logEntry('file-logger', conf, ctx);
    if (!entry) return;
    const path = conf.path ?? (ctx.pluginMetadata('file-logger')?.path as string | undefined);
    if (path === undefined) pluginLog().error(NO_PATH);
    else writeLine(path, entry);
  },
};
