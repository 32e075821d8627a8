// Preloaded into the conformance suite (node --import ./bearer.mjs): every HTTP request it sends to toolhub
// carries `Authorization: Bearer $TOOLHUB_CONFORMANCE_TOKEN`. The suite's server scenarios connect without
// credentials and toolhub's /mcp answers those 401; this is the header any MCP client configured with an API
// key sends. Requests to other origins go out unchanged.
//
// Both ways the suite sends HTTP go through undici's global dispatcher: the SDK's transport (global fetch) and
// the raw requests of some scenarios (undici's request), so the header is added there.
import { getGlobalDispatcher, setGlobalDispatcher } from 'undici';

const token = process.env.TOOLHUB_CONFORMANCE_TOKEN;
const url = process.env.TOOLHUB_CONFORMANCE_URL;
if (!token || !url) {
  throw new Error('bearer.mjs needs TOOLHUB_CONFORMANCE_TOKEN and TOOLHUB_CONFORMANCE_URL');
}
const origin = new URL(url).origin;
const value = `Bearer ${token}`;

function withAuthorization(headers) {
  if (headers == null) {
    return { authorization: value };
  }
  if (Array.isArray(headers)) {
    // undici's flat form [name, value, name, value, ...], or pairs [[name, value], ...]
    return Array.isArray(headers[0]) ? [...headers, ['authorization', value]] : [...headers, 'authorization', value];
  }
  if (typeof headers[Symbol.iterator] === 'function') {
    return [...headers, ['authorization', value]];
  }
  return { ...headers, authorization: value };
}

setGlobalDispatcher(
  getGlobalDispatcher().compose((dispatch) => (options, handler) => {
    const target = typeof options.origin === 'string' ? options.origin : options.origin?.toString();
    if (target && new URL(target).origin === origin) {
      options = { ...options, headers: withAuthorization(options.headers) };
    }
    return dispatch(options, handler);
  })
);
