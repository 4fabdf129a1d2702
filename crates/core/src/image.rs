//! Row-major images: RGB8 colour, depth in metres, instance ids.

use serde::{Deserialize, Serialize};

use crate::CoreError;

/// A row-major image of `width * height` pixels of type `T`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Image<T> {
    width: u32,
    height: u32,
    data: Vec<T>,
}

/// Colour image, 8 bits per channel, in R, G, B order.
pub type RgbImage = Image<[u8; 3]>;
/// Depth image: z along the optical axis in metres; 0 marks a missing measurement.
pub type DepthImage = Image<f32>;
/// Instance image: the id of the object instance seen at each pixel; 0 is structure or nothing.
pub type InstanceImage = Image<u16>;

impl<T: Clone> Image<T> {
    pub fn filled(width: u32, height: u32, value: T) -> Self {
        Self { width, height, data: vec![value; width as usize * height as usize] }
    }
}

impl<T> Image<T> {
    pub fn from_vec(width: u32, height: u32, data: Vec<T>) -> Result<Self, CoreError> {
        if data.len() != width as usize * height as usize {
            return Err(CoreError::ImageSize { width, height, len: data.len() });
        }
        Ok(Self { width, height, data })
    }

    pub fn width(&self) -> u32 {
        self.width
    }

    pub fn height(&self) -> u32 {
        self.height
    }

    pub fn data(&self) -> &[T] {
        &self.data
    }

    pub fn data_mut(&mut self) -> &mut [T] {
        &mut self.data
    }

    pub fn into_vec(self) -> Vec<T> {
        self.data
    }

    /// The pixel at column `x`, row `y`, or `None` outside the image.
    pub fn get(&self, x: u32, y: u32) -> Option<&T> {
        if x < self.width && y < self.height {
            self.data.get(y as usize * self.width as usize + x as usize)
        } else {
            None
        }
    }

    pub fn get_mut(&mut self, x: u32, y: u32) -> Option<&mut T> {
        if x < self.width && y < self.height {
            self.data.get_mut(y as usize * self.width as usize + x as usize)
        } else {
            None
        }
    }

    pub fn rows(&self) -> std::slice::ChunksExact<'_, T> {
        self.data.chunks_exact(self.width.max(1) as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexing_is_row_major_and_bounds_checked() -> Result<(), CoreError> {
        let image = Image::from_vec(3, 2, vec![0u16, 1, 2, 3, 4, 5])?;
        assert_eq!(image.get(2, 1), Some(&5));
        assert_eq!(image.get(3, 0), None);
        assert_eq!(image.rows().count(), 2);
        assert!(Image::from_vec(3, 2, vec![0u16; 5]).is_err());
        Ok(())
    }
}
