// The tail Worker of `celld serve`: workerd hands it each trace of the deployed Workers (a
// request's outcome, its console lines and exceptions, a queue batch's, a cron run's), and it
// posts them, as they are, to the host (plugins/tail-plugin.ts), which sends them to the
// `wrangler tail` sessions open for that Worker. Locally workerd leaves `scriptName` null: each
// Worker names itself in the props of its `tails` entry, passed on here.

interface Env {
  CELLD_TAIL: Fetcher;
}

export default {
  async tail(events: TraceItem[], env: Env, ctx: ExecutionContext): Promise<void> {
    const script = (ctx as ExecutionContext & { props?: { script?: string } }).props?.script ?? null;
    await env.CELLD_TAIL.fetch("http://celld.invalid/tail", { method: "POST", body: JSON.stringify({ script, events }) });
  },
} satisfies ExportedHandler<Env>;
