import { defineConfig } from "vitest/config";

// The browser test: a real `code-runner serve` and Debian's Chromium. Slow on a
// busy 2-core machine (a cold python boot, a browser start), hence the budgets.
export default defineConfig({
  test: {
    include: ["e2e/**/*.e2e.ts"],
    environment: "node",
    testTimeout: 180_000,
    hookTimeout: 120_000,
    fileParallelism: false,
  },
});
