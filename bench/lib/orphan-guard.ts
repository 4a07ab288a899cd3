// Loaded (node --import) into every process the bench starts: when the bench dies without stopping it
// (killed, crashed), the child notices it was orphaned and stops itself gracefully, so no server is left
// running on a shared machine.
const parent = process.ppid;
setInterval(() => {
  if (process.ppid !== parent) process.kill(process.pid, 'SIGTERM');
}, 500).unref();
