// @fencer/client: leases with fencing tokens from a fencer cluster, and
// fenced writes to PostgreSQL and Redis. See docs/clients-node.md.

export { Client } from './client.js';
export { Lease, defaultTTL } from './lease.js';
export {
  FencerError, LockedError, LeaseLostError, ReleasedError, ClosedError, NoLeaderError, UncertainError,
  InvalidArgumentError, AuthError, NoPermError, TLSError, ValueReleasedError, ServerError, parseReply, parseNotLeader,
  parseInvalidArgument,
} from './errors.js';
export { tokenFor } from './token.js';
export { StaleTokenError, TokenRangeError, check, toToken } from './fence.js';
export { FencedRedis, FencedRedisReplyError, defaultTokenKey } from './fence-redis.js';
export { FencedTable, TokenTable, DefinitionError } from './fence-pg.js';
