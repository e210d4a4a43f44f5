"""The training rows of a fit, read in the training precision.

Training runs in float32 (the bilevel tuners in float64), but a caller's
table may be float64. Converting the table once would double the memory of
a float32 table's fit (a float32 copy beside float64 data is half the data
again). :class:`TrainingRows` instead keeps the rows as given -- a tensor
that is often a view of the caller's numpy array or ``numpy.memmap`` -- and
converts what a step reads: the rows of a batch, or a block of rows.
Converting a value from float64 to float32 is exact rounding, the same
whether a row is converted with its table or alone, so a fit on a float64
table is the fit on its float32 copy, bit for bit. (Small tables are still
converted once, which is faster per step: see :func:`training_rows`.)

A table that is not an array at all -- a *row store* such as an
``h5py.Dataset`` (:func:`is_row_store`) -- is read the same way by
:class:`StoreRows`: a batch or a block of rows at a time, never whole.
"""

import warnings

import numpy as np
import torch

#: Rows per block of :meth:`TrainingRows.blocks`.
ROW_BLOCK = 65536

#: Bytes of the largest copy :func:`training_rows` makes of a table in
#: another floating dtype than training's: 256 MiB, e.g. 670,000 float64
#: rows of 100 features. Within the memory budget of any table (its size
#: times 1.25 plus 0.5 GB), and a table that large takes seconds per epoch,
#: so converting its batches as they are read costs little.
CONVERT_ONCE_BYTES = 256 * 2**20


def shared_tensor(array):
    """``torch.from_numpy(array)`` (no copy) for a numeric array, also a
    read-only one: torch's warning that writing to it would be undefined
    is moot, since training and scoring never write to the rows.

    >>> import numpy as np
    >>> from skdp.models import shared_tensor
    >>> rows = np.arange(4.0)
    >>> rows.flags.writeable = False
    >>> shared_tensor(rows).tolist()
    [0.0, 1.0, 2.0, 3.0]
    """
    if array.dtype.kind not in "fiub":
        return torch.as_tensor(array)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        return torch.from_numpy(array)


class TrainingRows:
    """The rows of a fit as they were given, read in the training dtype.

    Parameters
    ----------
    data : torch.Tensor of shape (n_rows, ...)
        The rows, in any floating dtype (possibly a view of a numpy array or
        memmap); never written to.
    dtype : torch.dtype, optional
        The dtype every read returns; ``data``'s own by default.

    Examples
    --------
    >>> import torch
    >>> from skdp.models import TrainingRows
    >>> rows = TrainingRows(torch.arange(6, dtype=torch.float64).reshape(3, 2),
    ...                     torch.float32)
    >>> rows.shape, rows.dtype
    (torch.Size([3, 2]), torch.float32)
    >>> rows.index_select(0, torch.tensor([2, 0]))
    tensor([[4., 5.],
            [0., 1.]])
    """

    #: Whether a gather goes through the host (a row store): a step that
    #: gathers so cannot be captured in a CUDA graph.
    host_gather = False

    def __init__(self, data, dtype=None):
        self.data = data
        self.dtype = data.dtype if dtype is None else dtype

    @property
    def shape(self):
        return self.data.shape

    @property
    def device(self):
        return self.data.device

    @property
    def ndim(self):
        return self.data.ndim

    def __len__(self):
        return self.data.shape[0]

    def __getitem__(self, key):
        """The rows ``key`` (e.g. a slice of rows, or a column view), still
        as given and read in :attr:`dtype`."""
        return TrainingRows(self.data[key], self.dtype)

    def index_select(self, dim, index, out=None):
        """The rows ``index`` in :attr:`dtype`, written into ``out`` when
        given (a fresh tensor otherwise); only ``dim=0``."""
        if dim != 0:
            raise ValueError("TrainingRows gathers rows only (dim=0).")
        if self.data.dtype == self.dtype:
            return torch.index_select(self.data, 0, index, out=out)
        rows = self.data.index_select(0, index)
        return rows.to(self.dtype) if out is None else out.copy_(rows)

    def block(self, start, stop):
        """Rows ``start:stop`` in :attr:`dtype` (a view when no conversion
        is needed)."""
        return self.data[start:stop].to(self.dtype)

    def blocks(self, size=ROW_BLOCK):
        """The rows in order, :data:`ROW_BLOCK` at a time, in :attr:`dtype`."""
        for start in range(0, self.data.shape[0], size):
            yield self.block(start, start + size)

    def tensor(self):
        """Every row in :attr:`dtype`: ``data`` itself, or a converted copy
        (for callers that need the whole table as one tensor)."""
        return self.data.to(self.dtype)


def as_training_rows(X):
    """``X`` when it is a :class:`TrainingRows` already, else the rows of the
    tensor ``X`` in its own dtype."""
    return X if isinstance(X, TrainingRows) else TrainingRows(X)


def is_row_store(X):
    """Whether ``X`` is a table read by rows rather than an array in memory.

    A row store is 2-D, has a floating ``dtype`` and answers ``X[a:b]`` (a
    block of rows) and ``X[rows]`` for increasing integer ``rows`` (or
    ``X.oindex[rows]`` where it exists, as on zarr arrays) with
    array-likes, e.g. an ``h5py.Dataset``. Numpy arrays (memmaps too),
    DataFrames, sparse matrices and tensors are not stores: they are
    validated and viewed as arrays.

    >>> import numpy as np
    >>> from skdp.models import is_row_store
    >>> is_row_store(np.zeros((3, 2)))
    False
    """
    if isinstance(X, (np.ndarray, torch.Tensor, list, tuple)) or hasattr(X, "iloc"):
        return False
    if hasattr(X, "tocsr") or hasattr(X, "__cuda_array_interface__"):
        return False
    shape, dtype = getattr(X, "shape", None), getattr(X, "dtype", None)
    if shape is None or dtype is None or not hasattr(X, "__getitem__"):
        return False
    try:
        floating = np.issubdtype(np.dtype(dtype), np.floating)
    except TypeError:
        return False
    return len(shape) == 2 and floating


def gather_store_rows(store, rows):
    """The rows ``rows`` (int64 ndarray, any order, no repeats) of a row
    store as a numpy array, in that order: read in increasing order (what
    HDF5 needs), then put back in the order asked."""
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size == 0:
        return np.empty((0,) + tuple(store.shape[1:]), dtype=np.dtype(store.dtype))
    order = None
    if rows.size > 1 and (rows[1:] <= rows[:-1]).any():
        order = np.argsort(rows, kind="stable")
        rows = rows[order]
    reader = getattr(store, "oindex", store)
    values = np.asarray(reader[rows])
    if order is None:
        return values
    out = np.empty_like(values)
    out[order] = values
    return out


class StoreRows(TrainingRows):
    """The training rows of a row store (:func:`is_row_store`), read a batch
    or a block at a time and converted to ``dtype`` on ``device``.

    ``data`` is the store itself; nothing reads it whole but
    :meth:`tensor`.
    """

    host_gather = True

    def __init__(self, store, dtype, device):
        self.data = store
        self.dtype = dtype
        self._device = torch.device(device)
        self._shape = torch.Size(int(n) for n in store.shape)

    @property
    def shape(self):
        return self._shape

    @property
    def device(self):
        return self._device

    @property
    def ndim(self):
        return len(self._shape)

    def __len__(self):
        return self._shape[0]

    def __getitem__(self, key):
        raise TypeError("rows of a row store are read with index_select or block")

    def _tensor(self, values):
        return torch.from_numpy(np.ascontiguousarray(values)).to(device=self._device,
                                                                 dtype=self.dtype)

    def index_select(self, dim, index, out=None):
        if dim != 0:
            raise ValueError("TrainingRows gathers rows only (dim=0).")
        rows = self._tensor(gather_store_rows(self.data, index.cpu().numpy()))
        return rows if out is None else out.copy_(rows)

    def block(self, start, stop):
        return self._tensor(self.data[start:min(stop, self._shape[0])])

    def tensor(self):
        return torch.cat(list(self.blocks()))


def training_rows(array, device, dtype, *, convert_once=True):
    """The rows of a numeric ndarray to train on in ``dtype`` on ``device``.

    On the CPU a C-contiguous array already in ``dtype`` (a
    ``numpy.memmap`` too, read-only or not) is viewed, not copied. So is a
    larger floating array in another dtype (a float64 table trained in
    float32): it is converted as it is read. A small one -- whose copy in
    ``dtype`` takes at most :data:`CONVERT_ONCE_BYTES` -- is converted
    once when ``convert_once`` (pass False for rows read from a file):
    gathering a batch of float64 rows and converting it costs about three
    times the gather of float32 rows, which a small copy saves at every
    step. Other devices get a copy in ``dtype``. A row store
    (:func:`is_row_store`) is read a batch or a block at a time.
    """
    if is_row_store(array):
        return StoreRows(array, dtype, device)
    array = np.ascontiguousarray(array)
    data = shared_tensor(array)
    if torch.device(device).type != "cpu" or not data.is_floating_point():
        return TrainingRows(data.to(device=device, dtype=dtype))
    copy_bytes = data.numel() * torch.empty((), dtype=dtype).element_size()
    if data.dtype != dtype and convert_once and copy_bytes <= CONVERT_ONCE_BYTES:
        # numpy's conversion rounds alike and is about 3x faster than
        # torch's here: it asks the kernel for huge pages, torch's fresh
        # tensor takes a page fault per 4 KiB; a value beyond the dtype's
        # range becomes an infinity, as in torch's conversion (the caller
        # checks the range, before or from the rows' norms)
        with np.errstate(over="ignore"):
            converted = array.astype(_numpy_dtype(dtype))
        return TrainingRows(torch.from_numpy(converted))
    return TrainingRows(data, dtype)


def _numpy_dtype(dtype):
    """The numpy dtype of a torch floating dtype (float32 or float64)."""
    return torch.empty((), dtype=dtype).numpy().dtype
