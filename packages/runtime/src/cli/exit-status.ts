/**
 * What celld's exit status tells a supervisor. systemd's Restart=on-failure restarts on any of
 * these but 0; the documented unit lists `usage` and `config` in RestartPreventExitStatus, because
 * starting again cannot mend what is written on the command line or in the deployment's files,
 * and would only repeat the same error every RestartSec until the start limit.
 */
export const exitStatus = {
  ok: 0,
  /** A failure a restart may mend: a port taken, workerd gone, the data directory held or unusable. */
  failed: 1,
  /** A mistake on the command line. */
  usage: 2,
  /**
   * The deployment's files cannot start: the config does not parse or validate, `main` is missing,
   * a Worker does not bundle, `.dev.vars` is malformed, workerd refuses a config key, a setting is
   * out of its bound (`--cell-threads`, CELLD_CELL_THREADS: cli/cell-threads.ts). sysexits.h's
   * EX_CONFIG, which systemd's table of exit statuses names CONFIG.
   */
  config: 78,
} as const;
