/**
 * Matches a method and path against a table of routes. Paths are split into segments; `{name}` segments capture
 * one segment. When several patterns match a path, the one with the most literal segments wins, so
 * `/transactions/calculate-fee` is its own endpoint and not `/transactions/{id}`. A path that matches with no route
 * for the method is a 405 naming the allowed methods; a path that matches nothing is a 404.
 */
export interface Routable {
  readonly method: string
  readonly path: string
}

export type Match<R> =
  | { readonly _tag: "Found"; readonly route: R; readonly params: Readonly<Record<string, string>> }
  | { readonly _tag: "MethodNotAllowed"; readonly allow: ReadonlyArray<string> }
  | { readonly _tag: "NotFound" }

interface Compiled<R> {
  readonly route: R
  readonly method: string
  /** Literal segment, or null for a parameter (whose name is in `names` at the same index). */
  readonly literals: ReadonlyArray<string | null>
  readonly names: ReadonlyArray<string | null>
  readonly specificity: number
}

const compile = <R extends Routable>(route: R): Compiled<R> => {
  const segments = route.path.split("/").slice(1)
  const literals = segments.map((s) => (s.startsWith("{") && s.endsWith("}") ? null : s))
  const names = segments.map((s) => (s.startsWith("{") && s.endsWith("}") ? s.slice(1, -1) : null))
  return { route, method: route.method, literals, names, specificity: literals.filter((l) => l !== null).length }
}

const NOT_FOUND = { _tag: "NotFound" } as const

export const make = <R extends Routable>(table: ReadonlyArray<R>) => {
  // Grouped by segment count: a request path is compared only with patterns of its own length.
  const byLength = new Map<number, Array<Compiled<R>>>()
  for (const route of table) {
    const compiled = compile(route)
    const group = byLength.get(compiled.literals.length) ?? []
    group.push(compiled)
    byLength.set(compiled.literals.length, group)
  }
  for (const group of byLength.values()) group.sort((a, b) => b.specificity - a.specificity)

  return (method: string, pathname: string): Match<R> => {
    const segments = pathname.split("/").slice(1)
    const group = byLength.get(segments.length)
    if (group === undefined) return NOT_FOUND
    let best = -1
    let found: Compiled<R> | undefined
    const allow: Array<string> = []
    for (const candidate of group) {
      if (candidate.specificity < best) break
      let matches = true
      for (let i = 0; i < segments.length; i++) {
        const literal = candidate.literals[i]
        const segment = segments[i] ?? ""
        if (literal === null ? segment.length === 0 : literal !== segment) {
          matches = false
          break
        }
      }
      if (!matches) continue
      best = candidate.specificity
      allow.push(candidate.method)
      // HEAD is GET without the body, wherever GET is (RFC 9110 9.3.2); the adapter leaves the body out.
      if (candidate.method === "GET") allow.push("HEAD")
      if ((candidate.method === method || (method === "HEAD" && candidate.method === "GET")) && found === undefined) found = candidate
    }
    if (found !== undefined) {
      const params: Record<string, string> = {}
      found.names.forEach((name, i) => {
        if (name !== null) params[name] = safeDecode(segments[i] ?? "")
      })
      return { _tag: "Found", route: found.route, params }
    }
    return allow.length > 0 ? { _tag: "MethodNotAllowed", allow } : NOT_FOUND
  }
}

const safeDecode = (segment: string): string => {
  // Nearly every id arrives unescaped, and decodeURIComponent leaves such a segment as it is but costs a call into
  // the engine's runtime on every request.
  if (!segment.includes("%")) return segment
  try {
    return decodeURIComponent(segment)
  } catch {
    // A malformed escape is passed on as written: the id check then refuses it with a 400.
    return segment
  }
}
