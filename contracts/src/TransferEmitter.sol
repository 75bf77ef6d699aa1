// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

/// @title TransferEmitter
/// @notice Emits NFT transfer logs in bulk, with no token state behind them: the input of the
/// owners index's benchmark (bench/owners.go), which needs a million transfers on a chain
/// quickly. Each call emits `n` logs for the ids first .. first+n-1; the holder of id i at
/// step s is holder(i + s), one of `holders` addresses from 0x...1000 on.
contract TransferEmitter {
    /// ERC-721 (and, with three topics, ERC-20).
    event Transfer(address indexed from, address indexed to, uint256 indexed tokenId);
    /// ERC-1155.
    event TransferSingle(address indexed operator, address indexed from, address indexed to, uint256 id, uint256 value);
    event TransferBatch(address indexed operator, address indexed from, address indexed to, uint256[] ids, uint256[] values);

    function holder(uint256 i, uint256 holders) public pure returns (address) {
        return address(uint160(0x1000 + (i % holders)));
    }

    /// ERC-721 mints of ids first .. first+n-1 to holder(id).
    function mint721(uint256 first, uint256 n, uint256 holders) external {
        for (uint256 id = first; id < first + n; id++) {
            emit Transfer(address(0), holder(id, holders), id);
        }
    }

    /// ERC-721 transfers of ids first .. first+n-1 from holder(id + step) to holder(id + step + 1).
    function move721(uint256 first, uint256 n, uint256 holders, uint256 step) external {
        for (uint256 id = first; id < first + n; id++) {
            emit Transfer(holder(id + step, holders), holder(id + step + 1, holders), id);
        }
    }

    /// ERC-1155 mints (TransferSingle) of `amount` of ids first .. first+n-1 to holder(id).
    function mint1155(uint256 first, uint256 n, uint256 holders, uint256 amount) external {
        for (uint256 id = first; id < first + n; id++) {
            emit TransferSingle(msg.sender, address(0), holder(id, holders), id, amount);
        }
    }

    /// ERC-1155 batch mints (TransferBatch), `n` logs of `size` ids each from id first on: one
    /// of each id to holder(first id of the log).
    function batch1155(uint256 first, uint256 n, uint256 size, uint256 holders) external {
        uint256[] memory ids = new uint256[](size);
        uint256[] memory values = new uint256[](size);
        for (uint256 k = 0; k < n; k++) {
            uint256 base = first + k * size;
            for (uint256 j = 0; j < size; j++) {
                ids[j] = base + j;
                values[j] = 1;
            }
            emit TransferBatch(msg.sender, address(0), holder(base, holders), ids, values);
        }
    }
}
