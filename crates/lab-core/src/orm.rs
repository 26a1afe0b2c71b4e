//! The `orm` workload (seed 003): the operation mix of Jeremy Evans' simple_orm_benchmark, written directly in SQL,
//! each operation run with and without a wrapping transaction, one at a time.
//!
//! The seed ran the suite through ActiveRecord on one connection; what it measured was SQLite's settings (PRAGMA
//! and compile tuning), so the lab runs the same mix through each approach, under each PRAGMA profile and build
//! profile. The statements are in [`crate::sql`] (`ORM_*`); an approach runs one operation at a time
//! ([`crate::Approach::orm`]). The seed's two threading operations ([`ORM_THREADING`]) run several of those calls
//! at once.

use std::borrow::Cow;

use crate::data::{Param, Statement};
use crate::sql;

/// Artists seeded before the run; each has [`ORM_ALBUMS_PER_ARTIST`] albums of [`ORM_TRACKS_PER_ALBUM`] tracks.
pub const ORM_ARTISTS: i64 = 100;
/// Albums per seeded artist.
pub const ORM_ALBUMS_PER_ARTIST: i64 = 5;
/// Tracks per seeded album.
pub const ORM_TRACKS_PER_ALBUM: i64 = 5;

/// The seed's `light_threading` and `heavy_threading`, as the lab runs them (the seed names them without saying
/// what they do): a round of this many concurrent calls of this operation counts as one operation — several
/// concurrent primary-key reads, and more concurrent select-and-saves, each call on its own artist.
pub const ORM_THREADING: [(&str, usize, OrmOp); 2] = [
    ("light_threading", 4, OrmOp::SelectByPk),
    ("heavy_threading", 16, OrmOp::SelectAndSave),
];

/// One operation of the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OrmOp {
    /// Insert one artist.
    Creation,
    /// Select every seeded artist.
    Select,
    /// Select one artist by primary key.
    SelectByPk,
    /// Select artists by an indexed attribute.
    SelectByAttr,
    /// Select one artist, then save it with a new name.
    SelectAndSave,
    /// Create an artist and destroy it (the creation is part of the figure: the suite must not run out of rows).
    Destruction,
    /// Create an artist and an album of it.
    CreationWithAssociated,
    /// An artist with its albums, one query.
    EagerSingleQuery1N,
    /// An artist with its albums and their tracks, one query.
    EagerSingleQuery1NN,
    /// An artist, then its albums: a query per association.
    EagerQueryPerAssociation1N,
    /// An artist, its albums, their tracks: a query per association.
    EagerQueryPerAssociation1NN,
    /// Ten albums, then each album's artist: a query per record.
    Lazy11,
    /// Ten artists, then each artist's albums: a query per record.
    Lazy1N,
    /// Read nested values of an artist's JSON document.
    SelectJsonNested,
    /// Update a top-level value of an artist's JSON document.
    UpdateJson,
    /// Update a nested value of an artist's JSON document.
    UpdateJsonNested,
}

impl OrmOp {
    /// Every operation, in suite order.
    pub const ALL: [OrmOp; 16] = [
        Self::Creation,
        Self::Select,
        Self::SelectByPk,
        Self::SelectByAttr,
        Self::SelectAndSave,
        Self::Destruction,
        Self::CreationWithAssociated,
        Self::EagerSingleQuery1N,
        Self::EagerSingleQuery1NN,
        Self::EagerQueryPerAssociation1N,
        Self::EagerQueryPerAssociation1NN,
        Self::Lazy11,
        Self::Lazy1N,
        Self::SelectJsonNested,
        Self::UpdateJson,
        Self::UpdateJsonNested,
    ];

    /// The seed's name for the operation.
    pub fn name(self) -> &'static str {
        match self {
            Self::Creation => "model_object_creation",
            Self::Select => "model_object_select",
            Self::SelectByPk => "model_object_select_by_pk",
            Self::SelectByAttr => "model_object_select_by_attr",
            Self::SelectAndSave => "model_object_select_and_save",
            Self::Destruction => "model_object_destruction",
            Self::CreationWithAssociated => "model_object_and_associated_object_creation",
            Self::EagerSingleQuery1N => "eager_loading_single_query_with_1_to_n_records",
            Self::EagerSingleQuery1NN => "eager_loading_single_query_with_1_to_n_to_n_records",
            Self::EagerQueryPerAssociation1N => {
                "eager_loading_query_per_association_with_1_to_n_records"
            }
            Self::EagerQueryPerAssociation1NN => {
                "eager_loading_query_per_association_with_1_to_n_to_n_records"
            }
            Self::Lazy11 => "lazy_loading_with_1_to_1_records",
            Self::Lazy1N => "lazy_loading_with_1_to_n_records",
            Self::SelectJsonNested => "model_object_select_json_nested",
            Self::UpdateJson => "model_object_update_json",
            Self::UpdateJsonNested => "model_object_update_json_nested",
        }
    }

    /// Whether the operation only reads (an approach with separate read connections may serve it there).
    pub fn is_read(self) -> bool {
        !matches!(
            self,
            Self::Creation
                | Self::SelectAndSave
                | Self::Destruction
                | Self::CreationWithAssociated
                | Self::UpdateJson
                | Self::UpdateJsonNested
        )
    }
}

/// The name of an operation's result: `model_object_select` or `model_object_select (txn)`.
pub fn orm_result_name(op: OrmOp, txn: bool) -> String {
    orm_entry_name(op.name(), txn)
}

/// The name of a suite entry (an operation, or a threading round) in the results: `name`, or `name (txn)`.
pub fn orm_entry_name(name: &str, txn: bool) -> String {
    if txn {
        format!("{name} (txn)")
    } else {
        name.to_owned()
    }
}

/// The rows seeded into the `orm` database.
pub fn orm_seed() -> impl Iterator<Item = Statement> {
    let artists = (1..=ORM_ARTISTS).map(|id| Statement {
        sql: Cow::Borrowed(sql::ORM_SEED_ARTIST),
        params: vec![
            Param::Int(id),
            Param::Text(format!("artist-{}", id % 50)),
            Param::Text(artist_json(id)),
        ],
    });
    let albums = (1..=ORM_ARTISTS * ORM_ALBUMS_PER_ARTIST).map(|id| Statement {
        sql: Cow::Borrowed(sql::ORM_SEED_ALBUM),
        params: vec![
            Param::Int(id),
            Param::Int((id - 1) / ORM_ALBUMS_PER_ARTIST + 1),
            Param::Text(format!("album-{id}")),
        ],
    });
    let tracks =
        (1..=ORM_ARTISTS * ORM_ALBUMS_PER_ARTIST * ORM_TRACKS_PER_ALBUM).map(|id| Statement {
            sql: Cow::Borrowed(sql::ORM_SEED_TRACK),
            params: vec![
                Param::Int(id),
                Param::Int((id - 1) / ORM_TRACKS_PER_ALBUM + 1),
                Param::Text(format!("track-{id}")),
            ],
        });
    artists.chain(albums).chain(tracks)
}

/// An artist's JSON document.
pub fn artist_json(id: i64) -> String {
    format!(
        r#"{{"tags":{{"genre":"genre-{}","year":{}}},"plays":0}}"#,
        id % 7,
        1960 + id % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_seed_s_and_unique() {
        let mut names: Vec<&str> = OrmOp::ALL.iter().map(|op| op.name()).collect();
        assert_eq!(names[0], "model_object_creation");
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OrmOp::ALL.len());
        assert_eq!(
            orm_result_name(OrmOp::Select, true),
            "model_object_select (txn)"
        );
        assert!(OrmOp::Lazy1N.is_read() && !OrmOp::UpdateJson.is_read());
    }

    #[test]
    fn the_seed_has_every_association() {
        let rows: Vec<Statement> = orm_seed().collect();
        assert_eq!(rows.len(), 100 + 500 + 2_500);
        let last_track = rows.last().unwrap();
        assert_eq!(last_track.params[1], Param::Int(500), "the last album");
        assert!(artist_json(3).contains(r#""year":1963"#));
    }
}
