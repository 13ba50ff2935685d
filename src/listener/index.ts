/**
 * One listening port (./listen.ts) that speaks HTTP/1.1 and h2c, or HTTP/1.1 and h2 over TLS, to the
 * handlers it is given, within its limits (./limits.ts), closing HTTP/1.1 connections on the client's
 * account as ./closing.ts says. Below the proxy, up's platform API and the mesh, which listen with
 * it: nothing here imports proxy/ or roles/.
 */
export { listen, overHttp2, sniff, type Listener, type ListenerEvents, type ListenerHandlers, type ListenerOptions, type MeshServerCredentials } from './listen.js';
export { DEFAULT_LIMITS, MAX_HEADER_SIZE, SESSION_WINDOW, STREAM_WINDOW, type ListenerLimits } from './limits.js';
