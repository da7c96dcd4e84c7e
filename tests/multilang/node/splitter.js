// A multilang bolt written against Storm's protocol by hand (docs/Multilang-protocol.md), for
// tests/multilang/test_node.py: it splits each sentence into words, emitted anchored to it
// (the first asking for the task ids it went to, the others not), reports the words through the
// metric "words", answers heartbeats with sync, and acks the sentence.
const fs = require("fs");
const path = require("path");

let buffer = "";
let lines = [];
let handshaken = false;
let taskIdLists = 0;

function send(msg) {
  process.stdout.write(JSON.stringify(msg) + "\nend\n");
}

function handle(msg) {
  if (!handshaken) {
    handshaken = true;
    fs.writeFileSync(path.join(msg.pidDir, String(process.pid)), "");
    send({ pid: process.pid });
    send({ command: "log", msg: `splitter ${msg.context.componentid} task ${msg.context.taskid} ready` });
    return;
  }
  if (Array.isArray(msg)) { taskIdLists += 1; return; }  // the task ids of an earlier emit
  if (msg.stream === "__heartbeat") { send({ command: "sync" }); return; }
  const words = msg.tuple[0].split(" ");
  words.forEach((word, i) => {
    const emit = { command: "emit", anchors: [msg.id], tuple: [word] };
    if (i > 0) emit.need_task_ids = false;
    send(emit);
  });
  send({ command: "metrics", name: "words", params: words.length });
  send({ command: "ack", id: msg.id });
}

process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffer += chunk;
  let nl;
  while ((nl = buffer.indexOf("\n")) >= 0) {
    const line = buffer.slice(0, nl);
    buffer = buffer.slice(nl + 1);
    if (line === "end") { handle(JSON.parse(lines.join("\n"))); lines = []; }
    else if (line !== "" || lines.length) { lines.push(line); }
  }
});
process.stdin.on("end", () => process.exit(0));
