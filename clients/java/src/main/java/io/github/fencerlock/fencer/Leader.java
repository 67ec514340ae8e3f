package io.github.fencerlock.fencer;

/**
 * Leader is an election's leader as the server records it.
 *
 * @param value what the leader announced ({@link Election#campaign},
 *     {@link Election#proclaim})
 * @param epoch the leader's epoch: its lock's fencing token, larger than
 *     every earlier leader's
 * @param owner the campaigner's owner value on the server
 * @param session the session it leads under
 */
public record Leader(String value, long epoch, String owner, long session) {}
