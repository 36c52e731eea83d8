import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

// sockaddr_un holds 108 bytes on Linux and 104 on macOS, the terminating NUL included.
const socketPathMax = 100;

/**
 * A directory for the host's Unix sockets (the producer server's, the queue dispatch Worker's)
 * that only this user can enter (mode 0700), so only this user's processes can connect: a
 * loopback port is open to every local process. Either a directory the caller owns exclusively
 * (the host passes `<data>/run`, which its data-directory lock makes its own) or, when none is
 * given or its paths would be too long for a socket, a new one under the OS temporary directory.
 */
export class SocketDir {
  private constructor(
    readonly path: string,
    private readonly names: readonly string[],
    /** Made for these sockets alone: removed whole on close. */
    private readonly own: boolean,
  ) {}

  /**
   * The directory for sockets named `names`, with any of them a crashed host left there removed
   * (a socket file outlives its process, and binding its path again fails). Undefined where there
   * are no Unix sockets (Windows) or no directory whose socket paths fit.
   */
  static open(names: readonly string[], given?: string): SocketDir | undefined {
    if (process.platform === "win32") return undefined;
    if (given !== undefined && fits(given, names)) {
      mkdirSync(given, { recursive: true, mode: 0o700 });
      chmodSync(given, 0o700);
      for (const name of names) rmSync(join(given, name), { force: true });
      return new SocketDir(given, names, false);
    }
    const made = mkdtempSync(join(tmpdir(), "celld-"));
    if (fits(made, names)) return new SocketDir(made, names, true);
    rmSync(made, { recursive: true, force: true });
    return undefined;
  }

  socketPath(name: string): string {
    if (!this.names.includes(name)) throw new Error(`socket "${name}" was not named when ${this.path} was opened`);
    return join(this.path, name);
  }

  /** Removes the socket files a process that listened on them and exited left, keeping the directory. */
  removeSockets(): void {
    for (const name of this.names) rmSync(join(this.path, name), { force: true });
  }

  /** Removes the sockets, and the directory if it was made for them. */
  close(): void {
    if (this.own) rmSync(this.path, { recursive: true, force: true });
    else for (const name of this.names) rmSync(join(this.path, name), { force: true });
  }
}

/** The limit is in bytes, and a path's characters may take several each. */
function fits(dir: string, names: readonly string[]): boolean {
  return names.every((name) => Buffer.byteLength(join(dir, name)) <= socketPathMax);
}
