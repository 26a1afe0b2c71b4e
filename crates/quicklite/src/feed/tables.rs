//! The names of the feed's tables.

/// The table the triggers record the changes into.
pub(crate) const CHANGES: &str = "_quicklite_changes";

/// The table that remembers the last change retention deleted.
pub(crate) const STATE: &str = "_quicklite_feed";

/// The start of the feed's tables' and triggers' names: their own changes are no application's, and subscribers'
/// notices leave them out.
pub(crate) const PREFIX: &str = "_quicklite_";
