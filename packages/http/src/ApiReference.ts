/**
 * The API reference for a browser: `GET /docs` renders the generated OpenAPI document with a renderer the embedder
 * supplies as a script (the server serves Scalar's prebuilt browser bundle from npm), served by the handler itself
 * at `GET /docs/reference.js`, so nothing is fetched from a CDN at run time; `GET /` links to it and to the
 * document. Pages need no credentials (the document is public too); trying an operation in the page sends the
 * credentials the reader types in, like any client.
 */
import { PATH as OPENAPI_PATH } from "./OpenApi.js"
import type { Reply } from "./Reply.js"

export interface ReferenceOptions {
  /** The renderer's browser bundle (Scalar's `dist/browser/standalone.js`), served as it is. */
  readonly script: string
}

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

const page = (body: string, title: string): Reply => ({
  status: 200,
  body: `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)}</title></head><body>${body}</body></html>\n`,
  headers: {
    "content-type": "text/html; charset=utf-8",
    "cache-control": "no-store",
    // The page runs the bundled renderer and talks to this server only.
    "content-security-policy": "default-src 'self'; script-src 'self' 'unsafe-inline' 'unsafe-eval'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; connect-src 'self'",
    "x-content-type-options": "nosniff"
  }
})

/** The pages and the script, keyed by path below the base path; undefined for any other request. */
export const make = (options: ReferenceOptions, basePath: string) => {
  const openApiUrl = `${basePath}${OPENAPI_PATH}`
  // Scalar reads its configuration from the script tag; default fonts would come from its CDN, so they are off.
  const configuration = JSON.stringify({ withDefaultFonts: false, defaultOpenAllTags: true, telemetry: false })
  const docs = page(
    `<script id="api-reference" data-url="${escapeHtml(openApiUrl)}" data-configuration="${escapeHtml(configuration)}"></script>` +
      `<script src="${escapeHtml(`${basePath}/docs/reference.js`)}"></script>`,
    "Custody Relay API reference"
  )
  const index = page(
    `<h1>Custody Relay</h1><ul><li><a href="${escapeHtml(`${basePath}/docs`)}">API reference</a></li>` +
      `<li><a href="${escapeHtml(openApiUrl)}">OpenAPI document</a></li></ul>` +
      `<p>Every API call needs the headers <code>x-api-key</code> and <code>x-api-secret</code>.</p>`,
    "Custody Relay"
  )
  const script: Reply = {
    status: 200,
    body: options.script,
    headers: { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=3600", "x-content-type-options": "nosniff" }
  }
  return (method: string, pathname: string): Reply | undefined => {
    if (method !== "GET" && method !== "HEAD") return undefined
    if (pathname === "/" || pathname === "") return index
    if (pathname === "/docs" || pathname === "/docs/") return docs
    if (pathname === "/docs/reference.js") return script
    return undefined
  }
}
