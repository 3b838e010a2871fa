// Preloaded into a benchmarked server (`node --import bench/memory-probe.mjs`): with MEM_PROBE_FILE set, every
// MEM_PROBE_EVERY_MS (default 10,000) appends one JSON line (`at`: the time in ms since the epoch) of the process's memory in MB: RSS, the V8 heap (total, used, the old
// generation and the large-object space) and what lies outside it (`external`, of which `arrayBuffers`: Buffers).
// Tells a live heap that grows from garbage not yet collected and from memory outside the JavaScript heap.
import fs from 'node:fs';
import process from 'node:process';
import { setInterval } from 'node:timers';
import v8 from 'node:v8';

const out = process.env.MEM_PROBE_FILE;
const every = Number(process.env.MEM_PROBE_EVERY_MS ?? 10_000);
const mb = (bytes) => Math.round(bytes / 1048576);
if (out) {
  setInterval(() => {
    const m = process.memoryUsage();
    const space = Object.fromEntries(
      v8.getHeapSpaceStatistics().map((s) => [s.space_name, s.space_used_size]),
    );
    const line = {
      at: Date.now(),
      rss: mb(m.rss),
      heapTotal: mb(m.heapTotal),
      heapUsed: mb(m.heapUsed),
      oldSpace: mb(space.old_space ?? 0),
      largeObjects: mb((space.large_object_space ?? 0) + (space.new_large_object_space ?? 0)),
      external: mb(m.external),
      arrayBuffers: mb(m.arrayBuffers),
    };
    fs.appendFileSync(out, `${JSON.stringify(line)}\n`);
  }, every).unref();
}
