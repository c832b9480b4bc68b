/**
 * A Map kept as a bounded recently-used set: a Map iterates in insertion order, so an entry set again moves to the
 * back and the first key is the least recently used. Kept API users (KeptApiUsers, ApiUsersAtVersion) and
 * SQLite's prepared statements (StatementCache) are bounded this way.
 */

/** Sets `key` as the most recently used entry, then drops the least recently used while there are more than `capacity`. */
export const setRecent = <K, V>(entries: Map<K, V>, key: K, value: V, capacity: number): void => {
  entries.delete(key)
  entries.set(key, value)
  if (entries.size > capacity) {
    const oldest = entries.keys().next()
    if (oldest.done !== true) entries.delete(oldest.value)
  }
}
