// SPDX-License-Identifier: MIT
pragma solidity ^0.8.20;

import {ERC1155} from "@openzeppelin/contracts/token/ERC1155/ERC1155.sol";
import {ERC1155Burnable} from "@openzeppelin/contracts/token/ERC1155/extensions/ERC1155Burnable.sol";
import {ERC1155Supply} from "@openzeppelin/contracts/token/ERC1155/extensions/ERC1155Supply.sol";

/// @title TestERC1155
/// @notice An ERC-1155 for tests: per-id supply (exists, totalSupply), a name and symbol, an
/// `{id}` URI template and an ERC-7572 contract URI. There is no access control: anyone may
/// mint and set URIs; burn and burnBatch need `from` or an operator it approved.
contract TestERC1155 is ERC1155, ERC1155Supply, ERC1155Burnable {
    /// @notice ERC-7572: the contract-level metadata changed.
    event ContractURIUpdated();

    string public name;
    string public symbol;
    string private _contractURI;

    constructor(string memory name_, string memory symbol_, string memory uri_) ERC1155(uri_) {
        name = name_;
        symbol = symbol_;
    }

    function mint(address to, uint256 id, uint256 amount) external {
        _mint(to, id, amount, "");
    }

    function mintBatch(address to, uint256[] calldata ids, uint256[] calldata amounts) external {
        _mintBatch(to, ids, amounts, "");
    }

    /// @notice Replaces the URI template of every id; emits URI for id 0 only (ERC-1155
    /// has no event for a template change).
    function setURI(string calldata uri_) external {
        _setURI(uri_);
        emit URI(uri_, 0);
    }

    function setContractURI(string calldata uri_) external {
        _contractURI = uri_;
        emit ContractURIUpdated();
    }

    function contractURI() external view returns (string memory) {
        return _contractURI;
    }

    function _update(address from, address to, uint256[] memory ids, uint256[] memory values)
        internal
        override(ERC1155, ERC1155Supply)
    {
        super._update(from, to, ids, values);
    }
}
