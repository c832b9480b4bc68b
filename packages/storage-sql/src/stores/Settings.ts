/** Run-time settings (core `Settings.SettingsStore`) on SQL: one row per name, its value JSON text. */
import type { Settings } from "@custody-relay/core"
import { Effect, Option } from "effect"
import type { StoreArguments } from "../SqlUnit.js"

export const store = ({ db, statements: { first, write } }: StoreArguments): Settings.SettingsStore => ({
  getSetting(name) {
    return Effect.map(
      first(db.selectFrom("relay_settings").select("value").where("name", "=", name)),
      (row) => (row === undefined ? Option.none() : Option.some(row.value))
    )
  },
  putSetting(name, value) {
    return Effect.asVoid(write(
      db.insertInto("relay_settings").values({ name, value }).onConflict((oc) => oc.column("name").doUpdateSet({ value }))
    ))
  }
})
