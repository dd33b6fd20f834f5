/**
 * Replica acknowledgement of an acquisition, as Redisson's
 * `checkLockSyncedSlaves`: on the connection that took the hold (`WAIT`
 * counts that connection's writes), read the master's replication and
 * persistence state, then `WAIT` for its replicas and `WAITAOF` for its AOF.
 */

import { int, parseInfo, type Args } from "./commands";
import { isReplyError, type Link, type Links } from "./link";
import { REPLY_MARGIN, type ReplicaSync } from "./options";

/**
 * Waits for the master's replicas (and AOF) to have what `link` just
 * wrote. Resolves null when every copy acknowledged it (or none is
 * configured), else what fell short, for the `NotSynced` message.
 */
export async function syncReplicas(links: Links, link: Link, policy: ReplicaSync): Promise<string | null> {
  if (!policy.enabled) {
    return null;
  }
  const info = parseInfo(await links.call(link, ["INFO", "replication", "persistence"], policy.timeout + REPLY_MARGIN));
  const commands: Args[] = [];
  const replicas = Number(info.get("connected_slaves") ?? "0") || 0;
  if (replicas > 0) {
    commands.push(["WAIT", replicas, policy.timeout]);
  }
  if (policy.aof && info.get("aof_enabled") === "1") {
    commands.push(["WAITAOF", 1, 0, policy.timeout]);
  }
  for (const command of commands) {
    let reply: unknown;
    try {
      reply = await links.call(link, command, policy.timeout + REPLY_MARGIN);
    } catch (error) {
      if (command[0] === "WAITAOF" && isReplyError(error) && /unknown command/i.test((error as Error).message)) {
        continue; // before Redis 7.2: WAIT alone
      }
      throw error;
    }
    if (!synced(command, reply)) {
      return `${command.join(" ")} replied ${JSON.stringify(reply)}`;
    }
  }
  return null;
}

/** Whether `WAIT`/`WAITAOF`'s reply shows every copy asked for. */
function synced(command: Args, reply: unknown): boolean {
  if (command[0] === "WAIT") {
    return int(reply) >= Number(command[1]);
  }
  if (!Array.isArray(reply) || reply.length !== 2) {
    return false;
  }
  return int(reply[0]) >= Number(command[1]) && int(reply[1]) >= Number(command[2]);
}
