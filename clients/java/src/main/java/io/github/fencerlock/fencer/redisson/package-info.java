/**
 * The fencing token of a Redisson lock held through fencer:
 * {@link io.github.fencerlock.fencer.redisson.RedissonTokens}. Needs Redisson
 * on the class path; the client does not depend on it otherwise.
 */
package io.github.fencerlock.fencer.redisson;
