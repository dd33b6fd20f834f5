/**
 * A TCP proxy between the client and the server that loses one reply: the
 * first command whose bytes name both the command and the lock reaches the
 * server, and the connection is closed (or, stalling, left silent) before
 * the reply comes back. The fault a lost reply is, for real: the server
 * acted, the client cannot know how.
 */

import { createConnection, createServer, type Server as NetServer, type Socket } from "node:net";
import { Client } from "../src/index";
import type { Server } from "./support";

/** A command word as RESP sends it: a bulk string of its own (so LOCK.ACQUIRE never matches FAIRLOCK.ACQUIRE). */
function bulk(word: string): Buffer {
  return Buffer.from(`$${Buffer.byteLength(word)}\r\n${word}\r\n`);
}

/** The proxy: `port` to connect to; `fired` once a reply was withheld. */
export class FaultProxy {
  /** Whether the fault happened: a reply of the matched command was withheld. */
  fired = false;
  private tripped = false;
  private readonly sockets = new Set<Socket>();
  // The connection whose reply was withheld: its two sockets.
  private armedSockets: Socket[] = [];

  private constructor(
    private readonly server: NetServer,
    readonly port: number,
  ) {}

  /**
   * Forwards to `targetPort`; the first command holding `command`, `lock`
   * and every word of `also` loses its reply (`stall`: the connection
   * stays open, silent).
   */
  static async start(targetPort: number, command: string, lock: string, stall = false, also: readonly string[] = []): Promise<FaultProxy> {
    const words = [command, lock, ...also].map(bulk);
    let proxy: FaultProxy | undefined;
    const server = createServer((client) => {
      const upstream = createConnection(targetPort, "127.0.0.1");
      proxy!.sockets.add(client).add(upstream);
      let armed = false;
      client.on("data", (chunk: Buffer) => {
        // Armed before the command goes on: its reply follows it.
        if (!proxy!.tripped && words.every((w) => chunk.includes(w))) {
          proxy!.tripped = true;
          proxy!.armedSockets = [client, upstream];
          armed = true;
        }
        upstream.write(chunk);
      });
      upstream.on("data", (chunk: Buffer) => {
        if (armed) {
          proxy!.fired = true;
          if (!stall) {
            client.destroy();
            upstream.destroy();
          }
          return;
        }
        client.write(chunk);
      });
      const end = (): void => {
        client.destroy();
        upstream.destroy();
      };
      for (const socket of [client, upstream]) {
        socket.on("error", end);
        socket.on("close", end);
      }
    });
    const port = await new Promise<number>((done, fail) => {
      server.once("error", fail);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        done(typeof address === "object" && address !== null ? address.port : 0);
      });
    });
    proxy = new FaultProxy(server, port);
    return proxy;
  }

  /** Loses the reply of the next matching command too (once more). */
  rearm(): void {
    this.tripped = false;
    this.fired = false;
  }

  /** Closes the connection whose reply was withheld (a stalled one: the client sees it close). */
  cut(): void {
    for (const socket of this.armedSockets) {
      socket.destroy();
    }
  }

  /** Closes the proxy and every connection through it. */
  async close(): Promise<void> {
    for (const socket of this.sockets) {
      socket.destroy();
    }
    await new Promise<void>((done) => this.server.close(() => done()));
  }
}

/**
 * Runs `body` with a client object whose connection goes through a proxy
 * (to `server`) that loses the reply of the first `command` naming `name`
 * and every word of `also` (`stall`: the connection left open, silent);
 * closes all three after.
 */
export async function throughProxy(server: Server, command: string, name: string, body: (locks: Client, proxy: FaultProxy) => Promise<void>, also: readonly string[] = [], stall = false): Promise<void> {
  const proxy = await FaultProxy.start(server.port, command, name, stall, also);
  const app = server.client({ port: proxy.port });
  const locks = new Client(app);
  try {
    await body(locks, proxy);
  } finally {
    await locks.close();
    app.disconnect();
    await proxy.close();
  }
}
