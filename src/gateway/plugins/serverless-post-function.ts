/** serverless-post-function (apisix/plugins/serverless-post-function.lua): Lua functions last of all, at priority -2000. */
import { serverless } from './serverless.ts';

export const serverlessPostFunction = serverless('serverless-post-function', -2000);
