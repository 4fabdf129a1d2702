//! The fixed vocabularies: object classes and room types.

use serde::{Deserialize, Serialize};

macro_rules! vocabulary {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal, [$r:literal, $g:literal, $b:literal];)* }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $name { $($variant,)* }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The English name used in question texts ("coffee table").
            pub fn text(self) -> &'static str {
                match self { $($name::$variant => $text,)* }
            }

            /// A fixed colour for semantic images and visualisation.
            pub fn color(self) -> [u8; 3] {
                match self { $($name::$variant => [$r, $g, $b],)* }
            }

            /// Parses the snake_case or English name.
            pub fn parse(text: &str) -> Option<Self> {
                let wanted = text.trim().to_ascii_lowercase().replace('_', " ");
                Self::ALL.iter().copied().find(|value| value.text() == wanted)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.text())
            }
        }
    };
}

vocabulary! {
    /// Semantic class of a furniture instance. The vocabulary is fixed so that questions, perception and
    /// scoring agree; colours are distinct enough to tell apart in a semantic top-down.
    ObjectClass {
        Bed => "bed", [230, 25, 75];
        Nightstand => "nightstand", [60, 180, 75];
        Wardrobe => "wardrobe", [255, 225, 25];
        Dresser => "dresser", [0, 130, 200];
        Sofa => "sofa", [245, 130, 48];
        Armchair => "armchair", [145, 30, 180];
        CoffeeTable => "coffee table", [70, 240, 240];
        TvStand => "tv stand", [240, 50, 230];
        Television => "television", [210, 245, 60];
        Bookshelf => "bookshelf", [250, 190, 212];
        DiningTable => "dining table", [0, 128, 128];
        Chair => "chair", [220, 190, 255];
        Desk => "desk", [170, 110, 40];
        OfficeChair => "office chair", [255, 250, 200];
        Refrigerator => "refrigerator", [128, 0, 0];
        Stove => "stove", [170, 255, 195];
        KitchenCabinet => "kitchen cabinet", [128, 128, 0];
        Sink => "sink", [255, 215, 180];
        Dishwasher => "dishwasher", [0, 0, 128];
        Toilet => "toilet", [128, 128, 128];
        Bathtub => "bathtub", [100, 149, 237];
        Shower => "shower", [75, 0, 130];
        Washbasin => "washbasin", [176, 224, 230];
        WashingMachine => "washing machine", [205, 92, 92];
        Plant => "plant", [34, 139, 34];
        FloorLamp => "floor lamp", [255, 165, 0];
        Piano => "piano", [47, 79, 79];
        Bench => "bench", [188, 143, 143];
        Cabinet => "cabinet", [218, 112, 214];
        Shelf => "shelf", [154, 205, 50];
        Fireplace => "fireplace", [178, 34, 34];
        Computer => "computer", [72, 61, 139];
    }
}

vocabulary! {
    /// The room types of generated houses.
    RoomType {
        LivingRoom => "living room", [244, 208, 160];
        Kitchen => "kitchen", [180, 220, 240];
        Bedroom => "bedroom", [210, 190, 230];
        Bathroom => "bathroom", [170, 230, 210];
        Office => "office", [230, 230, 170];
        DiningRoom => "dining room", [240, 190, 190];
        Corridor => "corridor", [215, 215, 215];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vocabulary_is_large_distinct_and_parses_back() {
        assert!(ObjectClass::ALL.len() >= 25);
        let mut colors: Vec<_> = ObjectClass::ALL.iter().map(|c| c.color()).collect();
        colors.sort_unstable();
        colors.dedup();
        assert_eq!(colors.len(), ObjectClass::ALL.len());
        for class in ObjectClass::ALL {
            assert_eq!(ObjectClass::parse(class.text()), Some(*class));
        }
        assert_eq!(ObjectClass::parse("coffee_table"), Some(ObjectClass::CoffeeTable));
        assert_eq!(RoomType::parse("Living Room"), Some(RoomType::LivingRoom));
        assert_eq!(ObjectClass::parse("spaceship"), None);
    }
}
