//! The shadowing `wasi:filesystem` host: each call is wasmtime-wasi's own,
//! passed through the guard (descriptor budget, quota reservations, denial
//! facts) of [`GuardedFs`].

use std::sync::Arc;

use wasmtime::component::Resource;
use wasmtime_wasi::p2::bindings::filesystem::types::ErrorCode as AsyncErrorCode;
use wasmtime_wasi::p2::bindings::sync::filesystem::types::{
    self as fs, Descriptor, DescriptorFlags, DescriptorStat, DescriptorType, DirectoryEntry,
    DirectoryEntryStream, ErrorCode, Filesize, MetadataHashValue, NewTimestamp, OpenFlags,
    PathFlags,
};
use wasmtime_wasi::p2::bindings::sync::io::streams;
use wasmtime_wasi::p2::{FsError, FsResult};

use super::stream::QuotaRefused;
use super::{
    DESCRIPTOR, GuardedFs, LISTING, ends_in_parent, lock, read_whole, resolves_as_directory,
    trailing_slash, unlink_check,
};
use crate::work_quota::write_end;

impl GuardedFs<'_> {
    /// The host file behind `fd`; `None` for a directory (wasmtime-wasi's
    /// own call then answers as it does).
    fn file_of(&mut self, fd: &Resource<Descriptor>) -> FsResult<Option<Arc<std::fs::File>>> {
        Ok(match self.inner.table.get(fd)? {
            wasmtime_wasi::filesystem::Descriptor::File(f) => Some(f.file.clone()),
            wasmtime_wasi::filesystem::Descriptor::Dir(_) => None,
        })
    }
}

impl fs::Host for GuardedFs<'_> {
    fn convert_error_code(&mut self, err: FsError) -> wasmtime::Result<ErrorCode> {
        fs::Host::convert_error_code(&mut self.inner, err)
    }

    fn filesystem_error_code(
        &mut self,
        err: Resource<streams::Error>,
    ) -> wasmtime::Result<Option<ErrorCode>> {
        if self
            .inner
            .table
            .get(&err)?
            .downcast_ref::<QuotaRefused>()
            .is_some()
        {
            return Ok(Some(ErrorCode::Quota));
        }
        fs::Host::filesystem_error_code(&mut self.inner, err)
    }
}

impl fs::HostDescriptor for GuardedFs<'_> {
    fn read_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: Filesize,
    ) -> FsResult<Resource<streams::InputStream>> {
        let file = self.file_of(&fd)?;
        let result = self.inner.read_via_stream(fd, offset);
        let stream = self.seen(result)?;
        match file {
            Some(file) => self.whole_reads(stream, file, offset),
            None => Ok(stream),
        }
    }

    fn write_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
        offset: Filesize,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let file = self.file_of(&fd)?;
        let result = self.inner.write_via_stream(fd, offset);
        let stream = self.seen(result)?;
        self.guard_stream(stream, file, Some(offset))
    }

    fn append_via_stream(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<streams::OutputStream>> {
        let file = self.file_of(&fd)?;
        let result = self.inner.append_via_stream(fd);
        let stream = self.seen(result)?;
        self.guard_stream(stream, file, None)
    }

    fn advise(
        &mut self,
        fd: Resource<Descriptor>,
        offset: Filesize,
        len: Filesize,
        advice: fs::Advice,
    ) -> FsResult<()> {
        let result = self.inner.advise(fd, offset, len, advice);
        self.seen(result)
    }

    fn sync_data(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        let result = self.inner.sync_data(fd);
        self.seen(result)
    }

    fn get_flags(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorFlags> {
        let result = self.inner.get_flags(fd);
        self.seen(result)
    }

    fn get_type(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorType> {
        let result = self.inner.get_type(fd);
        self.seen(result)
    }

    fn set_size(&mut self, fd: Resource<Descriptor>, size: Filesize) -> FsResult<()> {
        let file = self.file_of(&fd)?;
        self.reserved(
            |g| g.reserve_growth(file.as_deref(), |_| size),
            |inner| inner.set_size(fd, size),
        )
    }

    fn set_times(
        &mut self,
        fd: Resource<Descriptor>,
        atim: NewTimestamp,
        mtim: NewTimestamp,
    ) -> FsResult<()> {
        let result = self.inner.set_times(fd, atim, mtim);
        self.seen(result)
    }

    fn read(
        &mut self,
        fd: Resource<Descriptor>,
        len: Filesize,
        offset: Filesize,
    ) -> FsResult<(Vec<u8>, bool)> {
        // wasmtime-wasi reads at most 64 KiB here; a positioned read is whole.
        let Some(file) = self.file_of(&fd)? else {
            let result = self.inner.read(fd, len, offset);
            return self.seen(result);
        };
        let result = read_whole(&file, offset, len)
            .map(|buf| {
                let end = buf.is_empty();
                (buf, end)
            })
            .map_err(FsError::from);
        self.seen(result)
    }

    fn write(
        &mut self,
        fd: Resource<Descriptor>,
        buf: Vec<u8>,
        offset: Filesize,
    ) -> FsResult<Filesize> {
        let want = buf.len() as u64;
        let file = self.file_of(&fd)?;
        self.reserved(
            |g| g.reserve_growth(file.as_deref(), |_| write_end(offset, want)),
            |inner| inner.write(fd, buf, offset),
        )
    }

    fn read_directory(
        &mut self,
        fd: Resource<Descriptor>,
    ) -> FsResult<Resource<DirectoryEntryStream>> {
        self.budget()?;
        let result = self.inner.read_directory(fd);
        let listing = self.seen(result)?;
        lock(self.guard).held.insert((LISTING, listing.rep()));
        Ok(listing)
    }

    fn sync(&mut self, fd: Resource<Descriptor>) -> FsResult<()> {
        let result = self.inner.sync(fd);
        self.seen(result)
    }

    fn create_directory_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        self.reserved(
            |g| g.quota.reserve_file(),
            |inner| inner.create_directory_at(fd, path),
        )
    }

    fn stat(&mut self, fd: Resource<Descriptor>) -> FsResult<DescriptorStat> {
        let result = self.inner.stat(fd);
        self.seen(result)
    }

    fn stat_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> FsResult<DescriptorStat> {
        // `stat("x/")` stats what x resolves to and wants a directory.
        let result = match resolves_as_directory(path.as_bytes()) {
            false => self.inner.stat_at(fd, path_flags, path),
            true => self
                .inner
                .stat_at(fd, path_flags | PathFlags::SYMLINK_FOLLOW, path)
                .and_then(|stat| match stat.type_ {
                    DescriptorType::Directory => Ok(stat),
                    _ => Err(FsError::from(AsyncErrorCode::NotDirectory)),
                }),
        };
        self.seen(result)
    }

    fn set_times_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        atim: NewTimestamp,
        mtim: NewTimestamp,
    ) -> FsResult<()> {
        let result = self.inner.set_times_at(fd, path_flags, path, atim, mtim);
        self.seen(result)
    }

    fn link_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path_flags: PathFlags,
        old_path: String,
        new_descriptor: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        self.reserved(
            |g| g.quota.reserve_file(),
            |inner| inner.link_at(fd, old_path_flags, old_path, new_descriptor, new_path),
        )
    }

    fn open_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
        oflags: OpenFlags,
        flags: DescriptorFlags,
    ) -> FsResult<Resource<Descriptor>> {
        self.budget()?;
        let creates = oflags.contains(OpenFlags::CREATE);
        let opened = self.reserved(
            |g| !creates || g.quota.reserve_file(),
            |inner| inner.open_at(fd, path_flags, path, oflags, flags),
        )?;
        let file = match self.inner.table.get(&opened)? {
            wasmtime_wasi::filesystem::Descriptor::File(f) => Some(f.file.clone()),
            wasmtime_wasi::filesystem::Descriptor::Dir(_) => None,
        };
        let mut guard = lock(self.guard);
        guard.held.insert((DESCRIPTOR, opened.rep()));
        if let Some(file) = file {
            guard.files.insert(opened.rep(), file);
        }
        Ok(opened)
    }

    fn drop(&mut self, fd: Resource<Descriptor>) -> wasmtime::Result<()> {
        {
            let mut guard = lock(self.guard);
            guard.held.remove(&(DESCRIPTOR, fd.rep()));
            guard.files.remove(&fd.rep());
        }
        fs::HostDescriptor::drop(&mut self.inner, fd)
    }

    fn readlink_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<String> {
        let result = self.inner.readlink_at(fd, path);
        self.seen(result)
    }

    fn remove_directory_at(&mut self, fd: Resource<Descriptor>, mut path: String) -> FsResult<()> {
        if ends_in_parent(path.as_bytes()) {
            let result = self
                .inner
                .stat_at(fd, PathFlags::SYMLINK_FOLLOW, path)
                .and_then(|_| Err(FsError::from(AsyncErrorCode::NotEmpty)));
            return self.seen(result);
        }
        if let Some(kept) = trailing_slash(path.as_bytes()) {
            path.truncate(kept);
        }
        let result = self.inner.remove_directory_at(fd, path);
        self.seen(result)
    }

    fn rename_at(
        &mut self,
        fd: Resource<Descriptor>,
        old_path: String,
        new_fd: Resource<Descriptor>,
        new_path: String,
    ) -> FsResult<()> {
        let result = self.inner.rename_at(fd, old_path, new_fd, new_path);
        self.seen(result)
    }

    fn symlink_at(
        &mut self,
        fd: Resource<Descriptor>,
        src_path: String,
        dest_path: String,
    ) -> FsResult<()> {
        self.reserved(
            |g| g.quota.reserve_file(),
            |inner| inner.symlink_at(fd, src_path, dest_path),
        )
    }

    fn unlink_file_at(&mut self, fd: Resource<Descriptor>, path: String) -> FsResult<()> {
        // `unlink("x/")`, `unlink("x/.")` remove nothing (see `unlink_check`).
        let result = match unlink_check(path.as_bytes()) {
            None => self.inner.unlink_file_at(fd, path),
            Some((kept, follow)) => {
                let flags = match follow {
                    true => PathFlags::SYMLINK_FOLLOW,
                    false => PathFlags::empty(),
                };
                self.inner
                    .stat_at(fd, flags, path[..kept].to_string())
                    .and_then(|stat| {
                        Err(match stat.type_ {
                            DescriptorType::Directory => FsError::from(AsyncErrorCode::IsDirectory),
                            _ => FsError::from(AsyncErrorCode::NotDirectory),
                        })
                    })
            }
        };
        self.seen(result)
    }

    fn is_same_object(
        &mut self,
        a: Resource<Descriptor>,
        b: Resource<Descriptor>,
    ) -> wasmtime::Result<bool> {
        self.inner.is_same_object(a, b)
    }

    fn metadata_hash(&mut self, fd: Resource<Descriptor>) -> FsResult<MetadataHashValue> {
        let result = self.inner.metadata_hash(fd);
        self.seen(result)
    }

    fn metadata_hash_at(
        &mut self,
        fd: Resource<Descriptor>,
        path_flags: PathFlags,
        path: String,
    ) -> FsResult<MetadataHashValue> {
        let result = self.inner.metadata_hash_at(fd, path_flags, path);
        self.seen(result)
    }
}

impl fs::HostDirectoryEntryStream for GuardedFs<'_> {
    fn read_directory_entry(
        &mut self,
        stream: Resource<DirectoryEntryStream>,
    ) -> FsResult<Option<DirectoryEntry>> {
        let result = self.inner.read_directory_entry(stream);
        self.seen(result)
    }

    fn drop(&mut self, stream: Resource<DirectoryEntryStream>) -> wasmtime::Result<()> {
        lock(self.guard).held.remove(&(LISTING, stream.rep()));
        fs::HostDirectoryEntryStream::drop(&mut self.inner, stream)
    }
}
