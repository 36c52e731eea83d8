import { closeSync, openSync, readSync } from "node:fs";
import { endianness } from "node:os";

// The WAL-index header SQLite keeps in `<db>-shm` (https://sqlite.org/walformat.html): two copies
// of a 48-byte header, then the checkpoint info. Fields are in the machine's byte order.
const szPageOffset = 14;
const mxFrameOffset = 16;
const nBackfillOffset = 96;
const readBytes = 100;
const frameHeaderBytes = 24;
const littleEndian = endianness() === "LE";

/**
 * How much of a WAL database's log has not been copied into the database file yet, read from
 * the WAL-index in `-shm`. The log file's size cannot say: once a checkpoint has copied it all,
 * SQLite writes the next commits over the old frames from the start of the same file.
 */
export class WalIndex {
  private readonly buffer = Buffer.alloc(readBytes);

  private constructor(private readonly fd: number) {}

  /** The `-shm` file must exist: SQLite creates it when the connection enters WAL mode. */
  static open(shmPath: string): WalIndex {
    return new WalIndex(openSync(shmPath, "r"));
  }

  /** Bytes of log written since the last complete checkpoint (frames, with their headers). */
  uncheckpointedBytes(): number {
    const read = readSync(this.fd, this.buffer, 0, readBytes, 0);
    if (read < readBytes) return 0; // not initialised yet: nothing has been written
    const b = this.buffer;
    const u16 = littleEndian ? b.readUInt16LE(szPageOffset) : b.readUInt16BE(szPageOffset);
    const pageBytes = u16 === 1 ? 65_536 : u16;
    const mxFrame = littleEndian ? b.readUInt32LE(mxFrameOffset) : b.readUInt32BE(mxFrameOffset);
    const nBackfill = littleEndian ? b.readUInt32LE(nBackfillOffset) : b.readUInt32BE(nBackfillOffset);
    return Math.max(0, mxFrame - nBackfill) * (pageBytes + frameHeaderBytes);
  }

  close(): void {
    closeSync(this.fd);
  }
}
