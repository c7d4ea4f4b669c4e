/** serverless-pre-function (apisix/plugins/serverless-pre-function.lua): Lua functions first of all, at priority 10000. */
import { serverless } from './serverless.ts';

export const serverlessPreFunction = serverless('serverless-pre-function', 10000);
