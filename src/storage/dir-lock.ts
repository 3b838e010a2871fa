// Exclusive lock on a data directory: a pid file created with O_EXCL. A lock whose process is gone
// (e.g. after SIGKILL) is taken over at once; a live one makes start-up fail with a clear message.
import fs from 'node:fs';
import path from 'node:path';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export class DirLockedError extends Error {
  constructor(dir: string, pid: number) {
    super(`dataDir ${dir} is in use by process ${pid}; only one Cinder process may use an embedded database`);
    this.name = 'DirLockedError';
  }
}

export function acquireDirLock(dir: string): () => void {
  const file = path.join(dir, 'cinder.lock');
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = fs.openSync(file, 'wx');
      fs.writeSync(fd, String(process.pid));
      fs.closeSync(fd);
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        process.removeListener('exit', release);
        try {
          if (fs.readFileSync(file, 'utf8') === String(process.pid)) fs.unlinkSync(file);
        } catch {
          // already gone
        }
      };
      process.on('exit', release);
      return release;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number(fs.readFileSync(file, 'utf8').trim());
      if (pid && pid !== process.pid && alive(pid)) throw new DirLockedError(dir, pid);
      if (pid === process.pid) throw new DirLockedError(dir, pid);
      fs.rmSync(file, { force: true });
    }
  }
  throw new Error(`could not lock dataDir ${dir}`);
}
