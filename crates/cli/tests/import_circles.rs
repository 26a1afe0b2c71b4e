//! No two modules of the crate use each other, directly or through others: each can be read, changed and tested
//! without the ones that use it. The checker (shared with lab-core's `tests/layers.rs`) reads every file under
//! `src/` and resolves the paths it names into the crate; a module's uses of its parent and children do not count.

#[path = "../../lab-core/tests/imports/mod.rs"]
mod imports;

use std::path::Path;

#[test]
fn no_two_modules_use_each_other() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    if let Some(circle) = imports::circle(&src) {
        panic!("modules that use each other: {}", circle.join(" -> "));
    }
}
