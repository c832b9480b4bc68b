/**
 * The API reference in a real browser: headless Chromium (Debian's chromium, driven by playwright-core) opens
 * /docs on a running relay, and the page, rendered from the generated OpenAPI document by the bundled renderer
 * with nothing fetched from another origin, shows every operation and the API-key security scheme. `/` links to it.
 */
import { existsSync } from "node:fs"
import { Routes } from "@custody-relay/http"
import { type Listening, serve } from "@custody-relay/http/node"
import { chromium, type Browser } from "playwright-core"
import { afterAll, assert, beforeAll, describe, it } from "vitest"
import { createRelay, type RunningRelay } from "../src/index.js"

const executablePath = ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((path) => existsSync(path))
if (executablePath === undefined) console.log("ApiReference: skipped, no Chromium at /usr/bin/chromium (apt-get install chromium; .ci/run installs it)")

describe.skipIf(executablePath === undefined)("the API reference at /docs, in headless Chromium", () => {
  let relay: RunningRelay
  let listening: Listening
  let browser: Browser
  beforeAll(async () => {
    relay = await createRelay({ database: ":memory:" })
    listening = await serve(relay.handler, { port: 0 })
    browser = await chromium.launch({ executablePath: executablePath ?? "", args: ["--no-sandbox"] })
  }, 60_000)
  afterAll(async () => {
    await browser?.close()
    await listening?.close()
    await relay?.close()
  })

  it("GEN-PATH-1: shows every operation and the API-key security scheme, loading nothing from another origin", async () => {
    const page = await browser.newPage()
    const foreign: Array<string> = []
    page.on("request", (request) => {
      if (!request.url().startsWith(listening.url) && !request.url().startsWith("data:")) foreign.push(request.url())
    })
    await page.goto(`${listening.url}/docs`)
    await page.waitForFunction(() => (document.body.textContent ?? "").includes("List custody accounts"), undefined, { timeout: 30_000 })
    // Every operation is listed (the page names each by its summary). The renderer draws sections as they come
    // into view, so the page is scrolled to its end, step by step, before reading it.
    const summaries = Routes.routes.map((route) => route.summary)
    let missing: ReadonlyArray<string> = summaries
    for (let step = 0; step < 200 && missing.length > 0; step += 1) {
      const text = await page.evaluate(() => {
        window.scrollBy(0, 1500)
        return document.body.textContent ?? ""
      })
      missing = summaries.filter((summary) => !text.includes(summary))
      if (missing.length > 0) await page.waitForTimeout(100)
    }
    const text = await page.evaluate(() => document.body.textContent ?? "")
    assert.deepStrictEqual(missing, [])
    assert.include(text, "x-api-key")
    assert.include(text, "x-api-secret")
    assert.deepStrictEqual(foreign, [])
    await page.close()
  }, 60_000)

  it("/ links to the reference and to the OpenAPI document", async () => {
    const page = await browser.newPage()
    await page.goto(`${listening.url}/`)
    const links = await page.$$eval("a", (anchors) => anchors.map((anchor) => anchor.getAttribute("href")))
    assert.deepStrictEqual(links, ["/docs", "/relay/v1/openapi.json"])
    await page.close()
  }, 30_000)
})
