package io.github.fencerlock.fencer;

import java.time.Duration;

/**
 * Status is the current grant of a held lock, as the leader sees it.
 *
 * @param owner the holder's owner value
 * @param token the grant's fencing token (unsigned; see {@link FencerClient})
 * @param remaining the time left on the leader's clock
 */
public record Status(String owner, long token, Duration remaining) {}
