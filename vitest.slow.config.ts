import { defineConfig } from "vitest/config";

// Soak and crash tests with large counts; `npm run test:slow`. They read CELLD_SLOW to scale up.
export default defineConfig({
  test: {
    include: ["packages/*/test/**/*.test.ts", "test/**/*.test.ts"],
    exclude: ["**/node_modules/**"],
    testTimeout: 1_800_000,
    hookTimeout: 120_000,
    pool: "forks",
  },
});
