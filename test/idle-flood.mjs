// A child process that holds idle TCP connections to one port: the flood of the connection-limit
// tests (issue 35). One process holds at most what its open-files limit allows (20,000 on the test
// machines, and only root with CAP_SYS_RESOURCE may raise it), so a test spreads a flood of 25,000
// over several of these. Each connects from its own loopback address (127.0.0.N) so that the
// flood's ephemeral ports and TIME_WAITs do not use up one address's range.
// Driven over IPC: {cmd: "open", port, count, localAddress, reconnect} opens `count` connections
// (at most 500 connecting at once) and answers with the counts; {cmd: "stats"} answers the counts;
// {cmd: "close"} closes them all and answers. With reconnect, a connection the server closes is
// opened again 100 ms later, as an attacker keeping the pressure on would.
import { connect } from "node:net";

const sockets = new Set();
const stats = { opened: 0, failed: 0, closedByServer: 0, open: 0, firstError: undefined };
let stopping = false;
let target;

function openOne() {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port: target.port, localAddress: target.localAddress });
    let connected = false;
    socket.on("connect", () => {
      connected = true;
      stats.opened++;
      stats.open++;
      sockets.add(socket);
      resolve();
    });
    socket.on("error", (error) => {
      stats.firstError ??= error.code ?? error.message;
      if (!connected) {
        stats.failed++;
        resolve();
      }
    });
    socket.on("close", () => {
      if (!connected) return;
      sockets.delete(socket);
      stats.open--;
      if (stopping) return;
      stats.closedByServer++;
      if (target.reconnect) setTimeout(() => !stopping && void openOne(), 100);
    });
  });
}

async function openMany(count) {
  let next = 0;
  const lane = async () => {
    while (next < count) {
      next++;
      await openOne();
    }
  };
  await Promise.all(Array.from({ length: Math.min(500, count) }, lane));
}

process.on("message", async (message) => {
  if (message.cmd === "open") {
    target = message;
    await openMany(message.count);
  } else if (message.cmd === "close") {
    stopping = true;
    for (const socket of sockets) socket.destroy();
  }
  process.send({ ...stats });
});
